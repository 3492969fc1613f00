// Unit tests of the TF-free CPU algorithms (cc/kernels/sum_tree_cpu.h,
// descend_cpu.h, philox_cpu.h) and of what they share with the CUDA kernels
// (sum_tree_algorithm.h: the descent, the Philox uniforms). The ops over them
// are tested from Python, as users call them (tests/test_sum_tree.py, ...).

#include "cc/kernels/sum_tree_cpu.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "cc/kernels/cpu_features.h"
#include "cc/kernels/descend_cpu.h"
#include "cc/kernels/philox_cpu.h"
#include "cc/kernels/sum_tree_algorithm.h"
#include "gtest/gtest.h"

namespace adasamp {
namespace {

template <typename T>
std::vector<T> Built(const std::vector<T>& weights) {
  const int64_t capacity = TreeCapacity(weights.size());
  std::vector<T> tree(2 * capacity, T(-1));
  EXPECT_TRUE(
      cpu::BuildTree(weights.data(), weights.size(), tree.data(), capacity));
  return tree;
}

// The tree over `weights`, each node summed from its children by the test.
template <typename T>
std::vector<T> ReferenceTree(const std::vector<T>& weights) {
  const int64_t capacity = TreeCapacity(weights.size());
  std::vector<T> tree(2 * capacity, T(0));
  for (size_t i = 0; i < weights.size(); ++i) tree[capacity + i] = weights[i];
  for (int64_t node = capacity - 1; node >= 1; --node) {
    tree[node] = tree[2 * node] + tree[2 * node + 1];
  }
  tree[0] = static_cast<T>(weights.size());
  return tree;
}

template <typename T>
std::vector<T> RandomWeights(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<T> uniform(0, 1);
  std::vector<T> weights(n);
  for (T& w : weights) w = uniform(rng) < T(0.2) ? T(0) : uniform(rng);
  return weights;
}

template <typename T>
class SumTreeCpuTest : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SumTreeCpuTest, Dtypes);

// --- Sampling ----------------------------------------------------------------

// Draw u goes to the smallest leaf i with cumsum(w)[i] > u * total. Small
// integer weights and dyadic u keep every sum and u * total exact.
TYPED_TEST(SumTreeCpuTest, SampleIsSmallestLeafWhoseCumsumExceedsTarget) {
  using T = TypeParam;
  std::mt19937_64 rng(1);
  for (int64_t n : {1, 2, 3, 7, 8, 33, 100}) {
    std::vector<T> weights(n);
    for (T& w : weights) w = static_cast<T>(rng() % 4);
    weights[rng() % n] = 1;  // a positive total
    const std::vector<T> tree = Built(weights);
    const T total = tree[1];
    std::vector<T> uniforms;
    for (int k = 0; k < 256; ++k) uniforms.push_back(T(k) / T(256));
    std::vector<int64_t> indices(uniforms.size());
    std::vector<T> probabilities(uniforms.size());
    const int64_t capacity = TreeCapacity(n);
    cpu::Descend(cpu::MakeWalks(tree.data(), Log2(capacity)), uniforms.data(),
                 uniforms.size(), indices.data(), probabilities.data());
    for (size_t k = 0; k < uniforms.size(); ++k) {
      const T target = uniforms[k] * total;
      int64_t expected = 0;
      for (T cumsum = weights[0]; !(cumsum > target);) {
        cumsum += weights[++expected];
      }
      EXPECT_EQ(indices[k], expected) << "n = " << n << ", u = " << uniforms[k];
      EXPECT_EQ(Descend(tree.data(), capacity, target), expected);
      EXPECT_EQ(probabilities[k], weights[expected] / total);
    }
  }
}

// Round-off can put u * total on or past the last cumsum: the walk still
// ends on a positive leaf, never on a zero weight or padding.
TYPED_TEST(SumTreeCpuTest, SampleNeverEndsOnZeroWeightOrPadding) {
  using T = TypeParam;
  const std::vector<T> weights = {0, T(0.1), 0, T(0.7), T(0.2), 0};
  const std::vector<T> tree = Built(weights);
  const int64_t capacity = TreeCapacity(weights.size());
  for (T target : {T(0), tree[1], tree[1] * 2, BelowOne<T>::kValue * tree[1],
                   std::numeric_limits<T>::infinity()}) {
    const int64_t leaf = Descend(tree.data(), capacity, target);
    ASSERT_LT(leaf, static_cast<int64_t>(weights.size()));
    EXPECT_GT(weights[leaf], T(0)) << "target " << target;
  }
}

// The lockstep walks (branch-free and, where the CPU has it, AVX-512) are
// Descend bit for bit, on trees larger than the caches' prefetch threshold
// too.
TYPED_TEST(SumTreeCpuTest, LockstepWalksEqualDescend) {
  using T = TypeParam;
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<T> uniform(0, 1);
  for (int64_t n : {1, 5, 1000, 300000}) {
    const std::vector<T> tree = Built(RandomWeights<T>(rng, n));
    const int64_t capacity = TreeCapacity(n);
    const cpu::Walks<T> walks = cpu::MakeWalks(tree.data(), Log2(capacity));
    std::vector<T> uniforms(1000);
    for (T& u : uniforms) u = uniform(rng);
    uniforms[0] = 0;
    uniforms[1] = BelowOne<T>::kValue;
    std::vector<int64_t> indices(uniforms.size()), scalar(uniforms.size());
    std::vector<T> probabilities(uniforms.size()), scalar_p(uniforms.size());
    cpu::Descend(walks, uniforms.data(), uniforms.size(), indices.data(),
                 probabilities.data());
    for (size_t k = 0; k < uniforms.size(); k += cpu::kWalks) {
      const int count = std::min<int>(cpu::kWalks, uniforms.size() - k);
      cpu::DescendScalar(walks, uniforms.data() + k, count, scalar.data() + k,
                         scalar_p.data() + k);
    }
    for (size_t k = 0; k < uniforms.size(); ++k) {
      const int64_t expected =
          Descend(tree.data(), capacity, uniforms[k] * tree[1]);
      ASSERT_EQ(indices[k], expected) << "n = " << n << ", draw " << k;
      ASSERT_EQ(scalar[k], expected) << "n = " << n << ", draw " << k;
      ASSERT_EQ(probabilities[k], tree[capacity + expected] / tree[1]);
      ASSERT_EQ(scalar_p[k], probabilities[k]);
    }
  }
}

TYPED_TEST(SumTreeCpuTest, ImpossibleDrawsAreFoundOnTreesNoBuildWrote) {
  using T = TypeParam;
  std::vector<T> tree = ReferenceTree<T>({1, 2, 3});
  const std::vector<int64_t> draws = {0, 1, 2, 2};
  EXPECT_EQ(cpu::FirstImpossibleDraw(tree.data(), 4, draws.data(), 4), -1);
  tree = ReferenceTree<T>({-5, 6, 1});  // a negative leaf, and one above
  EXPECT_EQ(cpu::FirstImpossibleDraw(tree.data(), 4, draws.data() + 1, 3), 0);
  EXPECT_EQ(cpu::FirstImpossibleDraw(tree.data(), 4, draws.data(), 4), 0);
  const std::vector<int64_t> last_first = {2, 1};
  EXPECT_EQ(cpu::FirstImpossibleDraw(tree.data(), 4, last_first.data(), 2), 1);
  tree = ReferenceTree<T>({0, 2, 3});  // a draw on a zero weight
  EXPECT_EQ(cpu::FirstImpossibleDraw(tree.data(), 4, draws.data(), 4), 0);
}

// --- Build -------------------------------------------------------------------

TYPED_TEST(SumTreeCpuTest, BuildSumsChildrenPadsWithZeroAndRecordsNumLeaves) {
  using T = TypeParam;
  std::mt19937_64 rng(3);
  for (int64_t n : {1, 2, 5, 64, 1000}) {
    const std::vector<T> weights = RandomWeights<T>(rng, n);
    EXPECT_EQ(Built(weights), ReferenceTree(weights)) << "n = " << n;
  }
}

TYPED_TEST(SumTreeCpuTest, BuildStoresSubnormalWeightsAsZero) {
  using T = TypeParam;
  const T tiny = std::numeric_limits<T>::denorm_min();
  const std::vector<T> tree = Built<T>({tiny, 1, tiny * 3, 2});
  EXPECT_EQ(tree, ReferenceTree<T>({0, 1, 0, 2}));
  EXPECT_EQ(Built<T>({tiny, tiny})[1], T(0));
}

TYPED_TEST(SumTreeCpuTest, BuildRefusesAnInfSumWritingNothing) {
  using T = TypeParam;
  const T big = std::numeric_limits<T>::max();
  std::vector<T> tree(8, T(7));
  const std::vector<T> weights = {big, big / 2, 0};
  EXPECT_FALSE(cpu::BuildTree(weights.data(), 3, tree.data(), 4));
  EXPECT_EQ(tree, std::vector<T>(8, T(7)));
}

// The total without a tree is the root the build sums, bit for bit.
TYPED_TEST(SumTreeCpuTest, PairwiseTotalIsTheBuiltRoot) {
  using T = TypeParam;
  std::mt19937_64 rng(4);
  std::lognormal_distribution<T> spread(0, 8);
  for (int64_t n = 1; n <= 300; n += 7) {
    std::vector<T> weights(n);
    for (T& w : weights) w = spread(rng);
    const T total =
        cpu::PairwiseTotal<T>(n, [&](int64_t i) { return weights[i]; });
    EXPECT_EQ(total, ReferenceTree(weights)[1]) << "n = " << n;
  }
}

// --- Set ---------------------------------------------------------------------

// Sets of random batches, with repeats (the last one wins), small (hashed)
// and large (sorted): the tree is the one built from the new weights.
TYPED_TEST(SumTreeCpuTest, SetEqualsRebuildWithLastRepeatWinning) {
  using T = TypeParam;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<T> uniform(0, 1);
  for (int64_t n : {1, 3, 100, 70000}) {
    std::vector<T> weights = RandomWeights<T>(rng, n);
    std::vector<T> tree = Built(weights);
    for (int64_t count : {0, 1, 5, 128, 129, 3000}) {
      std::vector<int64_t> indices(count);
      std::vector<T> new_weights(count);
      for (int64_t k = 0; k < count; ++k) {
        indices[k] = rng() % std::min<int64_t>(n, 1 + count / 2);
        new_weights[k] = uniform(rng);
        weights[indices[k]] = new_weights[k];
      }
      ASSERT_TRUE(cpu::SetLeaves(indices.data(), new_weights.data(), count, n,
                                 tree.data(), TreeCapacity(n)));
      ASSERT_EQ(tree, ReferenceTree(weights))
          << "n = " << n << ", B = " << count;
    }
  }
}

TYPED_TEST(SumTreeCpuTest, SetRefusesAnInfSumWritingNothing) {
  using T = TypeParam;
  const T big = std::numeric_limits<T>::max();
  std::vector<T> tree = Built<T>({big / 2, big / 4, 0});
  const std::vector<T> before = tree;
  const std::vector<int64_t> indices = {2, 0};
  const std::vector<T> too_big = {big / 2, big / 2};
  EXPECT_FALSE(
      cpu::SetLeaves(indices.data(), too_big.data(), 2, 3, tree.data(), 4));
  EXPECT_EQ(tree, before);
  // Past the cheap bound, but the exact root fits: accepted.
  const std::vector<T> fits = {big / 4, big / 2};
  EXPECT_TRUE(
      cpu::SetLeaves(indices.data(), fits.data(), 2, 3, tree.data(), 4));
  EXPECT_EQ(tree, ReferenceTree<T>({big / 2, big / 4, big / 4}));
}

TYPED_TEST(SumTreeCpuTest, NewRootIsTheRootAfterTheSet) {
  using T = TypeParam;
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<T> uniform(0, 1);
  const int64_t n = 1000;
  std::vector<T> weights = RandomWeights<T>(rng, n);
  const std::vector<T> tree = Built(weights);
  std::vector<int64_t> indices(300);
  std::vector<T> new_weights(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    indices[k] = rng() % n;
    new_weights[k] = uniform(rng);
    weights[indices[k]] = new_weights[k];
  }
  const T root = cpu::NewRoot<T>(
      cpu::SortedUpdates(indices.data(), indices.size(), n), tree.data(),
      TreeCapacity(n), [&](int64_t position) { return new_weights[position]; });
  EXPECT_EQ(root, ReferenceTree(weights)[1]);
}

// Both ways of finding a batch's distinct indices give each index with its
// first and last position.
TEST(UpdatesTest, SmallAndSortedFindTheSameFirstAndLastPositions) {
  std::mt19937_64 rng(7);
  for (int64_t count : {0, 1, 17, 128}) {
    std::vector<int64_t> indices(count);
    for (int64_t& index : indices) index = rng() % 40;
    std::vector<std::tuple<int64_t, int64_t, int64_t>> expected, small, sorted;
    for (int64_t index = 0; index < 40; ++index) {
      int64_t first = -1, last = -1;
      for (int64_t k = 0; k < count; ++k) {
        if (indices[k] != index) continue;
        if (first < 0) first = k;
        last = k;
      }
      if (first >= 0) expected.emplace_back(index, first, last);
    }
    auto collect = [](auto* into) {
      return [into](int64_t index, int64_t first, int64_t last) {
        into->emplace_back(index, first, last);
      };
    };
    cpu::SmallUpdates(indices.data(), count).ForEachIndex(collect(&small));
    cpu::SortedUpdates(indices.data(), count, 40)
        .ForEachIndex(collect(&sorted));
    std::sort(small.begin(), small.end());
    EXPECT_EQ(sorted, expected) << "B = " << count;
    EXPECT_EQ(small, expected) << "B = " << count;
  }
}

// --- Reweight ----------------------------------------------------------------

// A sampler's state as the library builds it: log weights, log-scale 0.
template <typename T>
struct Sampler {
  explicit Sampler(std::vector<T> log_weights_in)
      : log_weights(std::move(log_weights_in)),
        capacity(TreeCapacity(log_weights.size())),
        tree(2 * capacity),
        entropy_tree(2 * capacity) {
    cpu::Rescale(T(0), state());
    entropy_tree[kTreeTotalNode] = tree[1];
  }
  cpu::SamplerState<T> state() {
    return {log_weights.data(),  static_cast<int64_t>(log_weights.size()),
            &log_scale,          tree.data(),
            entropy_tree.data(), capacity};
  }
  cpu::RefusedUpdate Reweight(const std::vector<int64_t>& indices,
                              const std::vector<T>& utilities, T amplitude,
                              T decay) {
    return cpu::Reweight(amplitude, decay, indices.data(), utilities.data(),
                         indices.size(), state());
  }
  std::vector<T> log_weights;
  int64_t capacity;
  T log_scale = 0;
  std::vector<T> tree;
  std::vector<T> entropy_tree;
};

// The caches hold exp(l - c) and its entropy term, summed as the build sums.
template <typename T>
void ExpectCachesMatchLogWeights(const Sampler<T>& s) {
  std::vector<T> leaves, entropy;
  for (T l : s.log_weights) {
    leaves.push_back(StoredWeight(std::exp(l - s.log_scale)));
    entropy.push_back(EntropyTerm(leaves.back(), l - s.log_scale));
  }
  std::vector<T> tree = ReferenceTree(leaves);
  std::vector<T> entropy_tree = ReferenceTree(entropy);
  tree[0] = s.tree[0];  // node 0 as the state's own build left it
  entropy_tree[0] = tree[1];
  EXPECT_EQ(s.tree, tree);
  EXPECT_EQ(s.entropy_tree, entropy_tree);
}

TYPED_TEST(SumTreeCpuTest, ReweightUpdatesFirstOccurrencesAndBothCaches) {
  using T = TypeParam;
  std::mt19937_64 rng(8);
  std::normal_distribution<T> normal(0, 1);
  for (int64_t count : {3, 128, 500}) {
    Sampler<T> sampler(std::vector<T>(300, T(0)));
    std::vector<T> expected = sampler.log_weights;
    std::vector<int64_t> indices(count);
    std::vector<T> utilities(count);
    std::vector<bool> seen(300);
    const T amplitude = T(0.5), decay = T(0.9);
    for (int64_t k = 0; k < count; ++k) {
      indices[k] = rng() % 300;
      utilities[k] = normal(rng);
      if (seen[indices[k]]) continue;
      seen[indices[k]] = true;
      expected[indices[k]] = ReweightedLogWeight(
          expected[indices[k]], utilities[k], amplitude, decay);
    }
    EXPECT_EQ(sampler.Reweight(indices, utilities, amplitude, decay).reason,
              cpu::RefusedUpdate::kNone);
    EXPECT_EQ(sampler.log_weights, expected);
    ExpectCachesMatchLogWeights(sampler);
  }
}

TYPED_TEST(SumTreeCpuTest, ReweightRefusesABatchWritingNothing) {
  using T = TypeParam;
  Sampler<T> sampler({0, 1, 2, 3});
  const Sampler<T> before = sampler;
  const T inf = std::numeric_limits<T>::infinity();
  cpu::RefusedUpdate refused = sampler.Reweight({0, 2, 1}, {1, inf, 1}, 1, 0);
  EXPECT_EQ(refused.reason, cpu::RefusedUpdate::kUtilityNotFinite);
  EXPECT_EQ(refused.position, 1);
  // A repeat is not applied, but its utility is checked all the same.
  refused = sampler.Reweight({3, 3}, {1, inf}, 1, 0);
  EXPECT_EQ(refused.reason, cpu::RefusedUpdate::kUtilityNotFinite);
  EXPECT_EQ(refused.position, 1);
  const T big = std::numeric_limits<T>::max();
  refused = sampler.Reweight({1, 3}, {1, big}, 4, T(0.5));
  EXPECT_EQ(refused.reason, cpu::RefusedUpdate::kLogWeightNotFinite);
  EXPECT_EQ(refused.position, 1);
  EXPECT_EQ(sampler.log_weights, before.log_weights);
  EXPECT_EQ(sampler.tree, before.tree);
  EXPECT_EQ(sampler.entropy_tree, before.entropy_tree);
  EXPECT_EQ(sampler.log_scale, before.log_scale);
}

// Decay 0 forgets the past: log weights of 0 cache leaves of exactly 1,
// whatever the scale was.
TYPED_TEST(SumTreeCpuTest, ReweightWithDecayZeroResetsTheScale) {
  using T = TypeParam;
  Sampler<T> sampler({5, 9, 30});
  sampler.log_scale = 7;
  EXPECT_EQ(sampler.Reweight({0, 1, 2}, {0, 0, 0}, 1, 0).reason,
            cpu::RefusedUpdate::kNone);
  EXPECT_EQ(sampler.log_scale, T(0));
  EXPECT_EQ(sampler.log_weights, std::vector<T>(3, T(0)));
  ExpectCachesMatchLogWeights(sampler);
  EXPECT_EQ(sampler.tree[1], T(3));
}

// A total past the safe range recomputes the caches with the log-sum-exp as
// the scale: the total is then 1 up to round-off.
TYPED_TEST(SumTreeCpuTest, ReweightRescalesWhenTheTotalLeavesItsRange) {
  using T = TypeParam;
  Sampler<T> sampler({0, 0});
  const T jump = std::log(RescaleBound<T>::kValue) * 2;
  EXPECT_EQ(sampler.Reweight({0}, {jump}, 1, T(0.5)).reason,
            cpu::RefusedUpdate::kNone);
  EXPECT_FALSE(NeedsRescale(sampler.tree[1]));
  EXPECT_NEAR(sampler.tree[1], T(1), T(1e-5));
  EXPECT_NE(sampler.log_scale, T(0));
  ExpectCachesMatchLogWeights(sampler);
}

// --- Philox ------------------------------------------------------------------

// Philox-4x32-10 as Salmon et al. (SC 2011) define it: the test's own copy,
// to pin TSL's generator, which the draws run on both devices, to the stream
// of `counter` + block under `key`.
std::array<uint32_t, 4> ReferencePhilox(std::array<uint32_t, 4> c,
                                        std::array<uint32_t, 2> k,
                                        uint64_t block) {
  const uint64_t low = (uint64_t{c[1]} << 32 | c[0]) + block;
  if (low < block && ++c[2] == 0) ++c[3];
  c[0] = static_cast<uint32_t>(low);
  c[1] = static_cast<uint32_t>(low >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c[0];
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0],
         static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1],
         static_cast<uint32_t>(p0)};
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return c;
}

std::array<uint32_t, 4> Block(const int64_t state[3], uint64_t block) {
  const Philox::ResultType out = PhiloxBlock(PhiloxFromState(state), block);
  return {out[0], out[1], out[2], out[3]};
}

// Random123's known answers for Philox-4x32-10.
TEST(PhiloxTest, GivesThePublishedAnswers) {
  const int64_t zero[3] = {0, 0, 0};
  EXPECT_EQ(Block(zero, 0), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d,
                                                     0xbc57ac4c, 0x9b00dbd8}));
  const int64_t ones[3] = {-1, -1, -1};
  EXPECT_EQ(Block(ones, 0), (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e,
                                                     0xa20bc7c6, 0x6d5451fd}));
  const int64_t pi[3] = {static_cast<int64_t>(0x85a308d3243f6a88u),
                         static_cast<int64_t>(0x0370734413198a2eu),
                         static_cast<int64_t>(0x299f31d0a4093822u)};
  EXPECT_EQ(Block(pi, 0), (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb,
                                                   0x5001e420, 0x24126ea1}));
}

// Every block a draw can reach (below 2 ** 31), from random states and from
// counters about to carry out of their low words.
TEST(PhiloxTest, BlocksEqualTheDefinitionCarriesIncluded) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 2000; ++trial) {
    int64_t state[3] = {static_cast<int64_t>(rng()),
                        static_cast<int64_t>(rng()),
                        static_cast<int64_t>(rng())};
    if (trial % 2 == 1) state[0] = -1 - static_cast<int64_t>(rng() % 4);
    if (trial % 4 == 3) state[1] = -1;
    const uint64_t block = trial < 1000 ? rng() % 8 : rng() % (1u << 31);
    const uint64_t c0 = state[0], c1 = state[1], key = state[2];
    const std::array<uint32_t, 4> counter = {
        static_cast<uint32_t>(c0), static_cast<uint32_t>(c0 >> 32),
        static_cast<uint32_t>(c1), static_cast<uint32_t>(c1 >> 32)};
    ASSERT_EQ(Block(state, block),
              ReferencePhilox(counter,
                              {static_cast<uint32_t>(key),
                               static_cast<uint32_t>(key >> 32)},
                              block))
        << "trial " << trial;
  }
}

std::array<uint32_t, 4> Words(const Philox::ResultType& block) {
  return {block[0], block[1], block[2], block[3]};
}

// The AVX-512 blocks equal TSL's, one after another, from random states and
// from counters about to carry out of their low 64 bits, and out of word 2.
TEST(PhiloxTest, VectorBlocksEqualScalarBlocksCarriesIncluded) {
#if defined(__x86_64__)
  if (!cpu::UseAvx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  std::mt19937_64 rng(10);
  for (int trial = 0; trial < 4000; ++trial) {
    int64_t state[3] = {static_cast<int64_t>(rng()),
                        static_cast<int64_t>(rng()),
                        static_cast<int64_t>(rng())};
    if (trial % 2 == 1) state[0] = -1 - static_cast<int64_t>(rng() % 16);
    if (trial % 4 == 3) state[1] = -1;
    if (trial % 8 == 5) state[1] = 0xffffffff;
    const uint64_t first =
        trial < 2000 ? rng() % 16
                     : rng() % ((uint64_t{1} << 31) - cpu::kPhiloxBlocks);
    Philox::ResultType vector[cpu::kPhiloxBlocks];
    Philox::ResultType scalar[cpu::kPhiloxBlocks];
    cpu::PhiloxBlocksAvx512(PhiloxFromState(state), first, vector);
    cpu::PhiloxBlocksScalar(PhiloxFromState(state), first, cpu::kPhiloxBlocks,
                            scalar);
    for (int b = 0; b < cpu::kPhiloxBlocks; ++b) {
      ASSERT_EQ(Words(vector[b]), Words(scalar[b]))
          << "trial " << trial << ", block " << first + b;
    }
  }
#else
  GTEST_SKIP() << "not an x86-64 CPU";
#endif
}

// A call's uniforms made a range at a time, as the CPU kernel's threads make
// them, equal DrawUniform's one at a time, whichever form makes the blocks.
TYPED_TEST(SumTreeCpuTest, DrawUniformsEqualDrawUniformOverAnyRange) {
  using T = TypeParam;
  const int64_t state[3] = {-5, 7, 99};
  const Philox philox = PhiloxFromState(state);
  const int64_t count = 1001;
  const std::pair<int64_t, int64_t> ranges[] = {
      {0, count}, {1, 2}, {3, 40}, {17, count}, {count - 1, count}, {5, 5}};
  std::vector<T> out(count);
  for (const bool stratified : {false, true}) {
    for (const auto& [begin, end] : ranges) {
      cpu::DrawUniforms<T>(philox, begin, end, count, stratified, out.data());
      for (int64_t i = begin; i < end; ++i) {
        ASSERT_EQ(out[i - begin], DrawUniform<T>(philox, i, count, stratified))
            << "uniform " << i << " of [" << begin << ", " << end << ")";
      }
    }
  }
}

// TF's UniformDistribution: a float from the low 23 bits of a word, a double
// from the low 20 bits of one and all 32 of the next.
TEST(PhiloxTest, UniformsTakeTheMantissaBitsOfTheOutput) {
  Philox::ResultType out;
  out[0] = 0;
  out[1] = 0xff7fffff;
  out[2] = 0xfff00000;
  out[3] = 1;
  EXPECT_EQ(PhiloxUniforms<float>::FromBits(out, 0), 0.0f);
  EXPECT_EQ(PhiloxUniforms<float>::FromBits(out, 1), 1.0f - 0x1p-23f);
  EXPECT_EQ(PhiloxUniforms<double>::FromBits(out, 0), 0x1p-52 * 0xff7fffffu);
  EXPECT_EQ(PhiloxUniforms<double>::FromBits(out, 1), 0x1p-52);
}

TEST(PhiloxTest, StateAdvancesBy256PerUniformWithCarry) {
  int64_t state[3] = {-256, 4, 9};
  AdvancePhiloxState(state, 1);
  EXPECT_EQ(state[0], 0);
  EXPECT_EQ(state[1], 5);
  EXPECT_EQ(state[2], 9);
  AdvancePhiloxState(state, 3);
  EXPECT_EQ(state[0], 768);
}

// Stratified uniform i of B lies in [i / B, (i + 1) / B), and below 1.
TYPED_TEST(SumTreeCpuTest, StratifiedUniformsStayInTheirStratum) {
  using T = TypeParam;
  const int64_t state[3] = {12, 34, 56};
  const int64_t count = 1000;
  for (int64_t i = 0; i < count; ++i) {
    const T u = DrawUniform<T>(PhiloxFromState(state), i, count, true);
    EXPECT_GE(u, T(i) / T(count) * (1 - 4 * std::numeric_limits<T>::epsilon()));
    EXPECT_LE(u, T(i + 1) / T(count));
    EXPECT_LT(u, T(1));
  }
  EXPECT_EQ(Stratified(BelowOne<T>::kValue, count - 1, count),
            BelowOne<T>::kValue);
}

}  // namespace
}  // namespace adasamp
