// Op registrations for the sum-tree. The tree is a resource variable holding
// 2 * capacity values in heap layout (see cc/kernels/sum_tree_algorithm.h);
// every op mutates or reads it in place under the variable's lock.

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace adasamp {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// Checks that inputs `a` and `b` are vectors of one length.
absl::Status MatchingVectors(InferenceContext* c, int a, int b) {
  ShapeHandle first, second;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(a), 1, &first));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(b), 1, &second));
  DimensionHandle unused;
  return c->Merge(c->Dim(first, 0), c->Dim(second, 0), &unused);
}

}  // namespace

REGISTER_OP("AdaSamp>SumTreeBuild")
    .Input("tree: resource")
    .Input("weights: T")
    .Attr("T: {float, double}")
    .Attr("num_leaves: int >= 1")
    .SetShapeFn([](InferenceContext* c) {
      int64_t num_leaves;
      TF_RETURN_IF_ERROR(c->GetAttr("num_leaves", &num_leaves));
      ShapeHandle weights;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &weights));
      DimensionHandle unused;
      return c->WithValue(c->Dim(weights, 0), num_leaves, &unused);
    })
    .Doc(R"doc(
Sets all leaf weights of the sum-tree `tree` and rebuilds it, O(n).

tree: a variable of shape [2 * capacity], capacity the power of two that pads
  num_leaves.
weights: [num_leaves] finite, nonnegative weights.
)doc");

REGISTER_OP("AdaSamp>SumTreeSet")
    .Input("tree: resource")
    .Input("indices: int64")
    .Input("weights: T")
    .Attr("T: {float, double}")
    .Attr("num_leaves: int >= 1")
    .SetShapeFn([](InferenceContext* c) { return MatchingVectors(c, 1, 2); })
    .Doc(R"doc(
Sets the weights of the given leaves and recomputes each touched ancestor from
its two children, O(B log n). Where an index repeats, its last weight wins.

indices: [B] leaf indices in [0, num_leaves).
weights: [B] finite, nonnegative weights.
)doc");

REGISTER_OP("AdaSamp>SumTreeSample")
    .Input("tree: resource")
    .Input("uniforms: T")
    .Output("indices: int64")
    .Output("probabilities: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle uniforms;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &uniforms));
      c->set_output(0, uniforms);
      c->set_output(1, uniforms);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Draws one leaf per uniform: the smallest index i with
cumsum(w)[i] > u * total, so index i has probability w_i / total. Deterministic
given the uniforms; never returns padding or a zero-weight leaf.

uniforms: [B] values in [0, 1).
indices: [B] drawn leaf indices.
probabilities: [B] w_i / total of each drawn index.
)doc");

REGISTER_OP("AdaSamp>SumTreeDraw")
    .Input("tree: resource")
    .Input("rng_state: resource")
    .Input("batch_size: int64")
    .Output("indices: int64")
    .Output("probabilities: T")
    .Attr("T: {float, double}")
    .Attr("stratified: bool = false")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle batch_size;
      TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(2, &batch_size));
      c->set_output(0, c->Vector(batch_size));
      c->set_output(1, c->Vector(batch_size));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Draws batch_size leaves as SumTreeSample does, on the uniforms that
tf.random.Generator.uniform([batch_size], T) would draw from the generator
whose Philox state is rng_state, and advances that state as the call would:
the same draws and the same state after, in one op instead of several.

rng_state: a tf.random.Generator's state variable, int64 [3] (Philox).
batch_size: the number of draws, in [0, 2**31 - 1].
stratified: if true, uniform i becomes (i + u_i) / batch_size (one draw per
  stratum of [0, 1)), rounded down below 1.
indices: [batch_size] drawn leaf indices.
probabilities: [batch_size] w_i / total of each drawn index.
)doc");

REGISTER_OP("AdaSamp>AdaptiveReweight")
    .Input("tree: resource")
    .Input("entropy_tree: resource")
    .Input("log_weights: resource")
    .Input("log_scale: resource")
    .Input("indices: int64")
    .Input("utilities: T")
    .Input("amplitude: T")
    .Input("decay: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(MatchingVectors(c, 4, 5));
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(6), 0, &unused));
      return c->WithRank(c->input(7), 0, &unused);
    })
    .Doc(R"doc(
Algorithm 1, line 5 of London (NIPS 2017), for a mini-batch: for each unique
index i (its first occurrence), w_i <- w_i ** decay * exp(amplitude * u_i).

The exact state is log_weights (l_i = log w_i); tree caches
exp(l_i - log_scale) and entropy_tree caches s_i * log(s_i) for the
conditional KL. When the cached total leaves its safe range, the caches are
recomputed with a fresh log_scale. At the end, node 0 of entropy_tree is set
to the tree's total (node 1 of tree), under the op's locks: one read of
entropy_tree's nodes 0 and 1 gives the (W, H) of one state.

Decay 0 forgets the past: w_i <- exp(amplitude * u_i). It also forgets the
log-scale: the caches are recomputed, O(n), with log_scale 0 where their total
allows it, so that indices 0..n-1 with utilities 0 (and amplitude 0) reset the
state to uniform in one op, with cached leaves of exactly 1.

indices: [B] example indices in [0, n), n = len(log_weights).
utilities: [B] finite utilities.
amplitude: scalar >= 0.
decay: scalar in [0, 1).
)doc");

}  // namespace adasamp
