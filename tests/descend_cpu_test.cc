// Unit tests of cc/kernels/descend_cpu.h, the CPU sampler's lockstep walks:
// each draw's leaf is the first whose prefix sum exceeds uniform * total
// (zero-weight leaves and the padding never drawn), its probability is
// w_i / total, and the scalar and AVX-512 forms agree on every group size.
// The trees here are summed by the test itself, so that nothing but
// descend_cpu.h is under test.

#include "cc/kernels/descend_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "cc/kernels/cpu_features.h"
#include "gtest/gtest.h"

namespace adasamp {
namespace cpu {
namespace {

// The tree over `weights` padded with zeros to a power of two: node 1 the
// root, node k's children 2k and 2k + 1, the leaves from node capacity on.
template <typename T>
std::vector<T> TreeOver(const std::vector<T>& weights, int* depth) {
  int64_t capacity = 1;
  *depth = 0;
  while (capacity < static_cast<int64_t>(weights.size())) {
    capacity <<= 1;
    ++*depth;
  }
  std::vector<T> tree(2 * capacity, T(0));
  for (size_t i = 0; i < weights.size(); ++i) tree[capacity + i] = weights[i];
  for (int64_t node = capacity - 1; node >= 1; --node) {
    tree[node] = tree[2 * node] + tree[2 * node + 1];
  }
  return tree;
}

// The draw of `uniform` by the test's own walk down `tree`.
template <typename T>
int64_t ReferenceLeaf(const std::vector<T>& tree, int depth, T uniform) {
  T target = uniform * tree[1];
  int64_t node = 1;
  for (int level = 0; level < depth; ++level) {
    const T left = tree[2 * node];
    const T right = tree[2 * node + 1];
    if (!(target < left) && right > T(0)) {
      target -= left;
      node = 2 * node + 1;
    } else {
      node = 2 * node;
    }
  }
  return node - (int64_t{1} << depth);
}

struct Draws {
  std::vector<int64_t> indices;
  std::vector<double> probabilities;
};

template <typename T>
Draws DrawAll(const std::vector<T>& tree, int depth,
              const std::vector<T>& uniforms) {
  std::vector<int64_t> indices(uniforms.size(), -1);
  std::vector<T> probabilities(uniforms.size(), T(-1));
  Descend(MakeWalks(tree.data(), depth), uniforms.data(), uniforms.size(),
          indices.data(), probabilities.data());
  return {indices, {probabilities.begin(), probabilities.end()}};
}

template <typename T>
class DescendCpuTest : public ::testing::Test {};

using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DescendCpuTest, Dtypes);

TYPED_TEST(DescendCpuTest, MakeWalksReadsTheRootAndSizesTheTree) {
  using T = TypeParam;
  int depth;
  const std::vector<T> tree = TreeOver<T>({1, 2, 3}, &depth);
  const Walks<T> walks = MakeWalks(tree.data(), depth);
  EXPECT_EQ(walks.tree, tree.data());
  EXPECT_EQ(walks.depth, 2);
  EXPECT_EQ(walks.total, T(6));
  EXPECT_FALSE(walks.large);
  // 2 * capacity values of sizeof(T) bytes: large once past 1 MiB.
  const int at_threshold = sizeof(T) == 8 ? 16 : 17;
  std::vector<T> big(int64_t{2} << (at_threshold + 1), T(1));
  EXPECT_FALSE(MakeWalks(big.data(), at_threshold).large);
  EXPECT_TRUE(MakeWalks(big.data(), at_threshold + 1).large);
}

TYPED_TEST(DescendCpuTest, EachDrawIsTheFirstLeafWhosePrefixSumExceedsIt) {
  using T = TypeParam;
  // Prefix sums 1, 3, 3, 7, 16 (a power of two, so that uniform * total is
  // exact): leaf 2 weighs nothing.
  int depth;
  const std::vector<T> tree = TreeOver<T>({1, 2, 0, 4, 9}, &depth);
  ASSERT_EQ(depth, 3);
  // Targets (uniform * 16) inside each leaf's interval and on its bounds: a
  // target equal to a prefix sum belongs to the next leaf of any weight.
  const std::vector<std::pair<T, int64_t>> cases = {
      {T(0), 0},   {T(0.5), 0}, {T(1), 1},  {T(2.5), 1},    {T(3), 3},
      {T(6.5), 3}, {T(7), 4},   {T(11), 4}, {T(15.875), 4},
  };
  std::vector<T> uniforms;
  for (const auto& c : cases) uniforms.push_back(c.first / T(16));
  const Draws draws = DrawAll(tree, depth, uniforms);
  const double weights[] = {1, 2, 0, 4, 9};
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(testing::Message() << "target " << cases[k].first);
    EXPECT_EQ(draws.indices[k], cases[k].second);
    EXPECT_DOUBLE_EQ(draws.probabilities[k],
                     static_cast<double>(T(weights[cases[k].second]) / T(16)));
  }
}

TYPED_TEST(DescendCpuTest, ZeroWeightLeavesAndPaddingAreNeverDrawn) {
  using T = TypeParam;
  // The only weight on leaf 5 of 6 (capacity 8): every uniform in [0, 1),
  // the largest one below 1 included, draws it.
  int depth;
  const std::vector<T> tree = TreeOver<T>({0, 0, 0, 0, 0, 3, 0, 0}, &depth);
  const std::vector<T> uniforms = {
      T(0), T(0.25), T(0.5), T(0.75), std::nextafter(T(1), T(0)),
  };
  const Draws draws = DrawAll(tree, depth, uniforms);
  for (size_t k = 0; k < uniforms.size(); ++k) {
    EXPECT_EQ(draws.indices[k], 5) << "uniform " << uniforms[k];
    EXPECT_EQ(draws.probabilities[k], 1.0);
  }
}

TYPED_TEST(DescendCpuTest, TheLargestUniformDrawsTheLastLeafWithWeight) {
  using T = TypeParam;
  // Leaves 3.. weigh nothing; the padding (leaves 5..7) too.
  int depth;
  const std::vector<T> tree = TreeOver<T>({1, 1, 1, 0, 0}, &depth);
  const Draws draws = DrawAll<T>(tree, depth, {std::nextafter(T(1), T(0))});
  EXPECT_EQ(draws.indices[0], 2);
}

TYPED_TEST(DescendCpuTest, ATreeOfOneLeafAlwaysDrawsIt) {
  using T = TypeParam;
  int depth;
  const std::vector<T> tree = TreeOver<T>({T(0.5)}, &depth);
  ASSERT_EQ(depth, 0);
  const Draws draws = DrawAll<T>(tree, depth, {T(0), T(0.9)});
  EXPECT_EQ(draws.indices, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(draws.probabilities, (std::vector<double>{1, 1}));
}

TYPED_TEST(DescendCpuTest, NoDrawsWriteNothing) {
  using T = TypeParam;
  int depth;
  const std::vector<T> tree = TreeOver<T>({1, 2}, &depth);
  int64_t index = -7;
  T probability = T(-7);
  const T uniform = T(0.5);
  Descend(MakeWalks(tree.data(), depth), &uniform, 0, &index, &probability);
  EXPECT_EQ(index, -7);
  EXPECT_EQ(probability, T(-7));
}

// Every count around the group size kWalks, so that whole groups (the
// AVX-512 form where the CPU has it) and the scalar remainder both run,
// on a tree large enough for the prefetching walks.
TYPED_TEST(DescendCpuTest, AnyCountOfDrawsEqualsTheReferenceWalk) {
  using T = TypeParam;
  std::mt19937_64 random(54);
  std::uniform_real_distribution<double> weight(0.0, 1.0);
  std::vector<T> weights(300000);
  for (T& w : weights) {
    // One in four weighs nothing.
    w = random() % 4 == 0 ? T(0) : static_cast<T>(weight(random));
  }
  int depth;
  const std::vector<T> tree = TreeOver(weights, &depth);
  ASSERT_TRUE(MakeWalks(tree.data(), depth).large);
  for (int64_t count : {1, kWalks - 1, kWalks, kWalks + 1, 3 * kWalks + 5}) {
    SCOPED_TRACE(testing::Message() << count << " draws");
    std::vector<T> uniforms(count);
    for (T& u : uniforms) {
      u = std::min(static_cast<T>(weight(random)), std::nextafter(T(1), T(0)));
    }
    const Draws draws = DrawAll(tree, depth, uniforms);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t leaf = ReferenceLeaf(tree, depth, uniforms[k]);
      ASSERT_EQ(draws.indices[k], leaf) << "draw " << k;
      ASSERT_GT(weights[leaf], T(0));
      ASSERT_EQ(
          draws.probabilities[k],
          static_cast<double>(tree[(int64_t{1} << depth) + leaf] / tree[1]));
    }
  }
}

TYPED_TEST(DescendCpuTest, ScalarGroupsOfAnySizeEqualWholeGroups) {
  using T = TypeParam;
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<T> weights(1000);
  for (T& w : weights) w = static_cast<T>(unit(random));
  int depth;
  const std::vector<T> tree = TreeOver(weights, &depth);
  const Walks<T> walks = MakeWalks(tree.data(), depth);
  std::vector<T> uniforms(kWalks);
  for (T& u : uniforms) u = static_cast<T>(unit(random));
  std::vector<int64_t> whole(kWalks);
  std::vector<T> whole_probabilities(kWalks);
  DescendScalar(walks, uniforms.data(), kWalks, whole.data(),
                whole_probabilities.data());
  for (int count = 1; count < kWalks; ++count) {
    std::vector<int64_t> part(count);
    std::vector<T> part_probabilities(count);
    DescendScalar(walks, uniforms.data(), count, part.data(),
                  part_probabilities.data());
    for (int g = 0; g < count; ++g) {
      ASSERT_EQ(part[g], whole[g]) << count << " walks, walk " << g;
      ASSERT_EQ(part_probabilities[g], whole_probabilities[g]);
    }
  }
}

#if defined(__x86_64__)
TYPED_TEST(DescendCpuTest, Avx512WalksEqualScalarWalksBitForBit) {
  using T = TypeParam;
  if (!UseAvx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  std::mt19937_64 random(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int64_t num_leaves : {1, 2, 5, 4096, 300000}) {
    SCOPED_TRACE(testing::Message() << num_leaves << " leaves");
    std::vector<T> weights(num_leaves);
    for (T& w : weights) {
      w = random() % 3 == 0 ? T(0) : static_cast<T>(unit(random));
    }
    weights[num_leaves / 2] = T(1);  // a total > 0
    int depth;
    const std::vector<T> tree = TreeOver(weights, &depth);
    const Walks<T> walks = MakeWalks(tree.data(), depth);
    std::vector<T> uniforms(kWalks);
    for (T& u : uniforms) u = static_cast<T>(unit(random));
    uniforms[0] = T(0);
    uniforms[1] = std::nextafter(T(1), T(0));
    std::vector<int64_t> vector_indices(kWalks), scalar_indices(kWalks);
    std::vector<T> vector_probabilities(kWalks), scalar_probabilities(kWalks);
    DescendAvx512(walks, uniforms.data(), vector_indices.data(),
                  vector_probabilities.data());
    DescendScalar(walks, uniforms.data(), kWalks, scalar_indices.data(),
                  scalar_probabilities.data());
    EXPECT_EQ(vector_indices, scalar_indices);
    EXPECT_EQ(vector_probabilities, scalar_probabilities);
  }
}
#endif  // defined(__x86_64__)

}  // namespace
}  // namespace cpu
}  // namespace adasamp
