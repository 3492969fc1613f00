// Unit tests of cc/kernels/sum_tree_checks.{h,cc}: each check passes what
// the ops take and refuses the rest with InvalidArgument, its message naming
// the argument, and for a value its index and the range it breaks. Linked
// against the installed TensorFlow's framework library (tensorflow::Tensor,
// its shapes and errors); the ops that run the checks are tested from
// Python (tests/test_ops.py).

#include "cc/kernels/sum_tree_checks.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"

namespace adasamp {
namespace {

using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

// Passes `status` if it is InvalidArgument with exactly `message`.
void ExpectRefused(const absl::Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(std::string(status.message()), message);
}

template <typename T>
Tensor VectorOf(const std::vector<T>& values) {
  Tensor tensor(tensorflow::DataTypeToEnum<T>::v(),
                TensorShape({static_cast<int64_t>(values.size())}));
  for (size_t i = 0; i < values.size(); ++i) tensor.flat<T>()(i) = values[i];
  return tensor;
}

TEST(SumTreeChecksTest, TreeShapeIsTwiceAPowerOfTwo) {
  for (int64_t size : {2, 4, 8, 1024}) {
    EXPECT_TRUE(CheckTreeShape(TensorShape({size}), "tree").ok()) << size;
  }
  for (int64_t size : {0, 1, 3, 6, 12}) {
    ExpectRefused(CheckTreeShape(TensorShape({size}), "tree"),
                  "tree must be a vector of 2 * capacity values, capacity a "
                  "power of two; got shape [" +
                      std::to_string(size) + "]");
  }
  ExpectRefused(CheckTreeShape(TensorShape({2, 2}), "entropy_tree"),
                "entropy_tree must be a vector of 2 * capacity values, "
                "capacity a power of two; got shape [2,2]");
  ExpectRefused(CheckTreeShape(TensorShape({}), "tree"),
                "tree must be a vector of 2 * capacity values, capacity a "
                "power of two; got shape []");
}

TEST(SumTreeChecksTest, TreeShapeMustPadTheGivenNumberOfLeaves) {
  // 5 leaves pad to a capacity of 8: a tree of 16 values.
  EXPECT_TRUE(CheckTreeShape(TensorShape({16}), "tree", 5).ok());
  EXPECT_TRUE(CheckTreeShape(TensorShape({16}), "tree", 8).ok());
  EXPECT_TRUE(CheckTreeShape(TensorShape({2}), "tree", 1).ok());
  // Without a number of leaves (-1), any tree shape passes.
  EXPECT_TRUE(CheckTreeShape(TensorShape({16}), "tree", -1).ok());
  ExpectRefused(CheckTreeShape(TensorShape({16}), "tree", 9),
                "tree has shape [16] but a tree over 9 leaves has shape [32]");
  ExpectRefused(CheckTreeShape(TensorShape({16}), "tree", 4),
                "tree has shape [16] but a tree over 4 leaves has shape [8]");
}

TEST(SumTreeChecksTest, PhiloxStateIsAVectorOfThree) {
  EXPECT_TRUE(CheckPhiloxStateShape(TensorShape({kPhiloxStateSize})).ok());
  for (const TensorShape& shape : {TensorShape({2}), TensorShape({4}),
                                   TensorShape({1, 3}), TensorShape({})}) {
    ExpectRefused(CheckPhiloxStateShape(shape),
                  "rng_state must be a Philox generator's state of shape "
                  "[3], got shape " +
                      shape.DebugString());
  }
}

TEST(SumTreeChecksTest, VectorsAndTheirLengths) {
  const Tensor three = VectorOf<float>({1, 2, 3});
  const Tensor two = VectorOf<int64_t>({1, 2});
  const Tensor scalar(1.5f);
  EXPECT_TRUE(CheckVector(three, "weights").ok());
  ExpectRefused(CheckVector(scalar, "weights"),
                "weights must be a vector, got shape []");
  EXPECT_TRUE(CheckSameLength(three, "indices", three, "weights").ok());
  ExpectRefused(CheckSameLength(two, "indices", three, "weights"),
                "indices has 2 elements but weights has 3");
  // Each is checked as a vector first, the first named first.
  ExpectRefused(CheckSameLength(scalar, "indices", three, "weights"),
                "indices must be a vector, got shape []");
  ExpectRefused(CheckSameLength(three, "indices", scalar, "weights"),
                "weights must be a vector, got shape []");
}

TEST(SumTreeChecksTest, ReadScalarReadsScalarsOnly) {
  double amplitude = -1;
  EXPECT_TRUE(ReadScalar(Tensor(0.25), "amplitude", &amplitude).ok());
  EXPECT_EQ(amplitude, 0.25);
  int64_t num_leaves = -1;
  EXPECT_TRUE(ReadScalar(Tensor(int64_t{7}), "num_leaves", &num_leaves).ok());
  EXPECT_EQ(num_leaves, 7);
  float decay = -1;
  ExpectRefused(ReadScalar(VectorOf<float>({0.5f}), "decay", &decay),
                "decay must be a scalar, got shape [1]");
  EXPECT_EQ(decay, -1);  // left as it was
}

template <typename T>
class SumTreeValueChecksTest : public ::testing::Test {};

using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SumTreeValueChecksTest, Dtypes);

TYPED_TEST(SumTreeValueChecksTest, ReweightParameters) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  EXPECT_TRUE(CheckReweightParameters<T>(T(0), T(0)).ok());
  EXPECT_TRUE(CheckReweightParameters<T>(T(0.1), T(0.5)).ok());
  EXPECT_TRUE(
      CheckReweightParameters<T>(std::numeric_limits<T>::max(), T(0.99)).ok());
  ExpectRefused(CheckReweightParameters<T>(T(-0.5), T(0)),
                "amplitude = -0.5 must be finite and >= 0");
  ExpectRefused(CheckReweightParameters<T>(inf, T(0)),
                "amplitude = inf must be finite and >= 0");
  ExpectRefused(CheckReweightParameters<T>(nan, T(0)),
                "amplitude = nan must be finite and >= 0");
  ExpectRefused(CheckReweightParameters<T>(T(1), T(1)),
                "decay = 1 must be in [0, 1)");
  ExpectRefused(CheckReweightParameters<T>(T(1), T(-0.25)),
                "decay = -0.25 must be in [0, 1)");
  ExpectRefused(CheckReweightParameters<T>(T(1), nan),
                "decay = nan must be in [0, 1)");
  // The amplitude is checked first.
  ExpectRefused(CheckReweightParameters<T>(T(-1), T(2)),
                "amplitude = -1 must be finite and >= 0");
}

TYPED_TEST(SumTreeValueChecksTest, WeightsAreFiniteAndNonnegative) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const Tensor good = VectorOf<T>({0, T(1.5), std::numeric_limits<T>::max(),
                                   std::numeric_limits<T>::denorm_min()});
  EXPECT_TRUE(CheckWeights<T>(good.flat<T>()).ok());
  const Tensor empty = VectorOf<T>({});
  EXPECT_TRUE(CheckWeights<T>(empty.flat<T>()).ok());
  // The first bad weight is named, by index and value.
  const Tensor negative = VectorOf<T>({1, 2, T(-3), inf});
  ExpectRefused(CheckWeights<T>(negative.flat<T>()),
                "weights[2] = -3 is not a finite, nonnegative weight");
  const Tensor infinite = VectorOf<T>({inf});
  ExpectRefused(CheckWeights<T>(infinite.flat<T>()),
                "weights[0] = inf is not a finite, nonnegative weight");
  const Tensor not_a_number = VectorOf<T>({1, nan});
  ExpectRefused(CheckWeights<T>(not_a_number.flat<T>()),
                "weights[1] = nan is not a finite, nonnegative weight");
}

TYPED_TEST(SumTreeValueChecksTest, NumLeavesMatchesTheRecordOrAnUnbuiltTree) {
  using T = TypeParam;
  EXPECT_TRUE(CheckNumLeaves<T>(T(5), 5).ok());
  // A tree no build wrote records 0, and takes any number.
  EXPECT_TRUE(CheckNumLeaves<T>(T(0), 5).ok());
  ExpectRefused(CheckNumLeaves<T>(T(4), 5),
                "num_leaves = 5 but the tree was built over 4 leaves");
}

TYPED_TEST(SumTreeValueChecksTest, OnlyAFinitePositiveTotalCanBeSampled) {
  using T = TypeParam;
  EXPECT_TRUE(CheckSampleableTotal<T>(T(1e-30)).ok());
  EXPECT_TRUE(CheckSampleableTotal<T>(std::numeric_limits<T>::max()).ok());
  ExpectRefused(CheckSampleableTotal<T>(T(0)),
                "cannot sample: the tree's total weight is 0");
  ExpectRefused(CheckSampleableTotal<T>(T(-2)),
                "cannot sample: the tree's total weight is -2");
  ExpectRefused(CheckSampleableTotal<T>(std::numeric_limits<T>::infinity()),
                "cannot sample: the tree's total weight is inf");
  ExpectRefused(CheckSampleableTotal<T>(std::numeric_limits<T>::quiet_NaN()),
                "cannot sample: the tree's total weight is nan");
}

TEST(SumTreeChecksTest, OverflowNamesTheDtype) {
  ExpectRefused(OverflowError<float>(),
                "the weights sum to inf in the tree: a node's sum would be "
                "past the range of float");
  ExpectRefused(OverflowError<double>(),
                "the weights sum to inf in the tree: a node's sum would be "
                "past the range of double");
}

TEST(SumTreeChecksTest, DrawBatchSizeFitsTheInt32ShapeLimit) {
  const int64_t max = std::numeric_limits<int32_t>::max();
  EXPECT_TRUE(CheckDrawBatchSize(0).ok());
  EXPECT_TRUE(CheckDrawBatchSize(max).ok());
  ExpectRefused(CheckDrawBatchSize(-1),
                "batch_size = -1 must be in [0, 2147483647]");
  ExpectRefused(CheckDrawBatchSize(max + 1),
                "batch_size = 2147483648 must be in [0, 2147483647]");
}

TEST(SumTreeChecksTest, IndicesAreInRange) {
  const Tensor good = VectorOf<int64_t>({0, 4, 2});
  EXPECT_TRUE(CheckIndices(good.flat<int64_t>(), 5).ok());
  const Tensor too_large = VectorOf<int64_t>({0, 5, 9});
  ExpectRefused(CheckIndices(too_large.flat<int64_t>(), 5),
                "indices[1] = 5 is out of range [0, 5)");
  const Tensor negative = VectorOf<int64_t>({3, -1});
  ExpectRefused(CheckIndices(negative.flat<int64_t>(), 5),
                "indices[1] = -1 is out of range [0, 5)");
}

}  // namespace
}  // namespace adasamp
