// Unit tests of cc/kernels/variable_locks.{h,cc}: VariableLocks::Acquire
// looks up an op's resource-variable inputs, refuses one that is missing,
// uninitialized, of another dtype or given twice (holding no lock after),
// and holds each variable's lock as its access says (shared to read,
// exclusive to update) until it is destroyed; an element-wise update turns
// the variable to copy-on-read, an in-place update unshares its buffer; and
// ops locking the same variables in opposite orders never deadlock. Run on
// TensorFlow's CPU device from the installed framework library, with an
// OpKernelContext made by hand, as an executor makes one for a kernel.

#define EIGEN_USE_THREADS

#include "cc/kernels/variable_locks.h"

#include <memory>
#include <string>
#include <thread>  // NOLINT(build/c++11): the test's second op
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tensorflow/core/framework/device.h"
#include "tensorflow/core/framework/device_factory.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_handle.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/public/session_options.h"
#include "tensorflow/core/public/version.h"

namespace adasamp {
namespace {

using ::tensorflow::DataType;
using ::tensorflow::Device;
using ::tensorflow::OpKernelContext;
using ::tensorflow::ResourceHandle;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorValue;
using ::tensorflow::Var;
using CPUDevice = Eigen::ThreadPoolDevice;

constexpr char kContainer[] = "variable_locks_test";

// The kernel whose context the tests make: OpKernelContext's allocations
// name it (an update that unshares a buffer allocates).
REGISTER_OP("AdaSampVariableLocksTest");

class NothingOp : public tensorflow::OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext*) override {}
};

REGISTER_KERNEL_BUILDER(
    Name("AdaSampVariableLocksTest").Device(tensorflow::DEVICE_CPU), NothingOp);

class VariableLocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = tensorflow::DeviceFactory::NewDevice(
        "CPU", tensorflow::SessionOptions(), "/job:localhost/replica:0/task:0");
    ASSERT_NE(device_, nullptr) << "no CPU device factory is registered";
    tensorflow::NodeDef node;
    node.set_name("locks");
    node.set_op("AdaSampVariableLocksTest");
    absl::Status made;
    kernel_ = tensorflow::CreateOpKernel(tensorflow::DEVICE_CPU, device_.get(),
                                         tensorflow::cpu_allocator(), node,
                                         TF_GRAPH_DEF_VERSION, &made);
    ASSERT_TRUE(made.ok()) << made;
  }

  // A variable `name` holding `values`, or uninitialized; the resource
  // manager holds it (its one reference) until the device goes.
  Var* AddVariable(const std::string& name, const std::vector<float>& values,
                   bool initialized = true,
                   DataType dtype = tensorflow::DT_FLOAT) {
    Var* var = new Var(dtype);
    if (initialized) {
      Tensor tensor(dtype, TensorShape({static_cast<int64_t>(values.size())}));
      for (size_t i = 0; i < values.size(); ++i) {
        if (dtype == tensorflow::DT_FLOAT) {
          tensor.flat<float>()(i) = values[i];
        } else {
          tensor.flat<double>()(i) = values[i];
        }
      }
      *var->tensor() = tensor;
      var->is_initialized = true;
    }
    EXPECT_TRUE(
        device_->resource_manager()->Create(kContainer, name, var).ok());
    return var;
  }

  // The op's inputs: one DT_RESOURCE scalar a variable name, each a handle to
  // that variable of this device (a name never added is looked up as one).
  void SetInputs(const std::vector<std::string>& names) {
    handles_.clear();
    inputs_.clear();
    handles_.reserve(names.size());
    for (const std::string& name : names) {
      const ResourceHandle handle = tensorflow::MakeResourceHandle(
          kContainer, name, *device_, tensorflow::TypeIndex::Make<Var>());
      handles_.emplace_back(tensorflow::DT_RESOURCE, TensorShape({}));
      handles_.back().scalar<ResourceHandle>()() = handle;
    }
    for (Tensor& handle : handles_) inputs_.emplace_back(&handle);
  }

  // A kernel's context over the inputs SetInputs made.
  std::unique_ptr<OpKernelContext> Context() {
    params_ = std::make_unique<OpKernelContext::Params>();
    params_->device = device_.get();
    params_->op_kernel = kernel_.get();
    params_->resource_manager = device_->resource_manager();
    params_->inputs = inputs_;
    return std::make_unique<OpKernelContext>(params_.get(), 0);
  }

  absl::Status Acquire(VariableLocks* locks,
                       const std::vector<VariableInput>& inputs) {
    std::unique_ptr<OpKernelContext> ctx = Context();
    return locks->Acquire<CPUDevice>(ctx.get(), inputs);
  }

  std::unique_ptr<Device> device_;
  std::unique_ptr<tensorflow::OpKernel> kernel_;
  std::vector<Tensor> handles_;
  std::vector<TensorValue> inputs_;
  std::unique_ptr<OpKernelContext::Params> params_;
};

VariableInput Input(int index, absl::string_view name, VariableAccess access,
                    DataType dtype = tensorflow::DT_FLOAT) {
  return {index, name, dtype, access};
}

// Whether `var` can be locked exclusively / shared now (not waiting).
bool FreeToWrite(Var* var) {
  if (!var->mu()->try_lock()) return false;
  var->mu()->unlock();
  return true;
}

bool FreeToRead(Var* var) {
  if (!var->mu()->try_lock_shared()) return false;
  var->mu()->unlock_shared();
  return true;
}

TEST_F(VariableLocksTest, GivesEachInputsTensorAndHoldsItsLockUntilDestroyed) {
  Var* tree = AddVariable("tree", {1, 2, 3, 4});
  Var* cache = AddVariable("cache", {5, 6});
  Var* state = AddVariable("state", {7});
  SetInputs({"tree", "cache", "state"});
  {
    VariableLocks locks;
    ASSERT_TRUE(
        Acquire(&locks, {Input(0, "tree", VariableAccess::kRead),
                         Input(1, "cache", VariableAccess::kUpdateElements),
                         Input(2, "state", VariableAccess::kUpdateInPlace)})
            .ok());
    EXPECT_EQ(locks.tensor(0).flat<float>()(3), 4);
    EXPECT_EQ(locks.tensor(1).flat<float>()(0), 5);
    EXPECT_EQ(locks.tensor(2).NumElements(), 1);
    // Writes through tensor(i) are the variable's.
    locks.tensor(1).flat<float>()(1) = 60;
    EXPECT_EQ(cache->tensor()->flat<float>()(1), 60);
    // A read shares its lock with other readers; an update holds its lock
    // alone.
    EXPECT_TRUE(FreeToRead(tree));
    EXPECT_FALSE(FreeToWrite(tree));
    EXPECT_FALSE(FreeToRead(cache));
    EXPECT_FALSE(FreeToRead(state));
  }
  EXPECT_TRUE(FreeToWrite(tree));
  EXPECT_TRUE(FreeToWrite(cache));
  EXPECT_TRUE(FreeToWrite(state));
}

TEST_F(VariableLocksTest, AnElementUpdateTurnsTheVariableCopyOnRead) {
  Var* read = AddVariable("read", {1});
  Var* updated = AddVariable("updated", {1});
  SetInputs({"read", "updated"});
  VariableLocks locks;
  ASSERT_TRUE(
      Acquire(&locks, {Input(0, "read", VariableAccess::kRead),
                       Input(1, "updated", VariableAccess::kUpdateElements)})
          .ok());
  EXPECT_FALSE(read->copy_on_read_mode.load());
  EXPECT_TRUE(updated->copy_on_read_mode.load());
}

TEST_F(VariableLocksTest, AnInPlaceUpdateUnsharesABufferAReadStillHolds) {
  Var* state = AddVariable("state", {1, 2, 3});
  // A read of the variable that outlives the op's start: the update must not
  // change what it reads.
  const Tensor earlier_read = *state->tensor();
  SetInputs({"state"});
  VariableLocks locks;
  ASSERT_TRUE(
      Acquire(&locks, {Input(0, "state", VariableAccess::kUpdateInPlace)})
          .ok());
  Tensor& tensor = locks.tensor(0);
  EXPECT_NE(tensor.flat<float>().data(), earlier_read.flat<float>().data());
  EXPECT_EQ(tensor.flat<float>()(2), 3);
  tensor.flat<float>()(2) = 30;
  EXPECT_EQ(earlier_read.flat<float>()(2), 3);
  EXPECT_EQ(state->tensor()->flat<float>()(2), 30);
}

TEST_F(VariableLocksTest, AnUnsharedBufferIsUpdatedWhereItIs) {
  Var* state = AddVariable("state", {1, 2, 3});
  const float* buffer = state->tensor()->flat<float>().data();
  SetInputs({"state"});
  VariableLocks locks;
  ASSERT_TRUE(
      Acquire(&locks, {Input(0, "state", VariableAccess::kUpdateInPlace)})
          .ok());
  EXPECT_EQ(locks.tensor(0).flat<float>().data(), buffer);
}

TEST_F(VariableLocksTest, RefusesAMissingVariable) {
  SetInputs({"never_created"});
  VariableLocks locks;
  const absl::Status status =
      Acquire(&locks, {Input(0, "tree", VariableAccess::kRead)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message())
                .rfind("tree is not an initialized variable: ", 0),
            0)
      << status;
}

TEST_F(VariableLocksTest, RefusesAnUninitializedVariable) {
  Var* tree = AddVariable("tree", {}, /*initialized=*/false);
  SetInputs({"tree"});
  VariableLocks locks;
  const absl::Status status =
      Acquire(&locks, {Input(0, "tree", VariableAccess::kRead)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "tree is an uninitialized variable");
  EXPECT_TRUE(FreeToWrite(tree));
}

TEST_F(VariableLocksTest, RefusesAVariableOfAnotherDtype) {
  Var* tree = AddVariable("tree", {1, 2}, true, tensorflow::DT_DOUBLE);
  SetInputs({"tree"});
  VariableLocks locks;
  const absl::Status status =
      Acquire(&locks, {Input(0, "tree", VariableAccess::kUpdateElements)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "tree has dtype double, expected float");
  // Refused before it was switched to copy-on-read, or locked.
  EXPECT_FALSE(tree->copy_on_read_mode.load());
  EXPECT_TRUE(FreeToWrite(tree));
}

TEST_F(VariableLocksTest, RefusesOneVariableGivenForTwoInputsHoldingNoLock) {
  Var* tree = AddVariable("tree", {1, 2});
  Var* other = AddVariable("other", {1});
  SetInputs({"other", "tree", "tree"});
  VariableLocks locks;
  const absl::Status status = Acquire(
      &locks, {Input(0, "other", VariableAccess::kUpdateInPlace),
               Input(1, "tree", VariableAccess::kRead),
               Input(2, "entropy_tree", VariableAccess::kUpdateElements)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "tree and entropy_tree are the same variable");
  EXPECT_TRUE(FreeToWrite(tree));
  EXPECT_TRUE(FreeToWrite(other));
}

// Two ops updating the same two variables, named in opposite orders: with
// the locks taken in address order, neither waits on the other forever (a
// deadlock here ends the test by Bazel's timeout).
TEST_F(VariableLocksTest, OpsLockingTheSameVariablesInOppositeOrdersFinish) {
  Var* a = AddVariable("a", {0});
  Var* b = AddVariable("b", {0});
  constexpr int kSteps = 2000;
  auto op = [&](const std::vector<std::string>& names) {
    std::vector<Tensor> handles;
    std::vector<TensorValue> inputs;
    handles.reserve(names.size());
    for (const std::string& name : names) {
      handles.emplace_back(tensorflow::DT_RESOURCE, TensorShape({}));
      handles.back().scalar<ResourceHandle>()() =
          tensorflow::MakeResourceHandle(kContainer, name, *device_,
                                         tensorflow::TypeIndex::Make<Var>());
    }
    for (Tensor& handle : handles) inputs.emplace_back(&handle);
    for (int step = 0; step < kSteps; ++step) {
      OpKernelContext::Params params;
      params.device = device_.get();
      params.op_kernel = kernel_.get();
      params.resource_manager = device_->resource_manager();
      params.inputs = inputs;
      OpKernelContext ctx(&params, 0);
      VariableLocks locks;
      ASSERT_TRUE(locks
                      .Acquire<CPUDevice>(
                          &ctx, {Input(0, "x", VariableAccess::kUpdateInPlace),
                                 Input(1, "y", VariableAccess::kUpdateInPlace)})
                      .ok());
      // Both held: counts that no other op's update interleaves.
      locks.tensor(0).flat<float>()(0) += 1;
      locks.tensor(1).flat<float>()(0) += 1;
    }
  };
  std::thread forward(op, std::vector<std::string>{"a", "b"});
  std::thread backward(op, std::vector<std::string>{"b", "a"});
  forward.join();
  backward.join();
  EXPECT_EQ(a->tensor()->flat<float>()(0), 2 * kSteps);
  EXPECT_EQ(b->tensor()->flat<float>()(0), 2 * kSteps);
}

}  // namespace
}  // namespace adasamp
