// Op registrations for draw permits: how far an adaptive tf.data pipeline may
// draw ahead of the training step (tf_adasamp/data.py, `max_lag`).

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/full_type_util.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace adasamp {

REGISTER_OP("AdaSamp>DrawPermitsHandle")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Output("handle: resource")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
A handle to a count of draw permits, created at first use with none.
)doc");

REGISTER_OP("AdaSamp>ReleaseDrawPermits")
    .Input("permits: resource")
    .Input("count: int64")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs)
    .Doc(R"doc(
Adds `count` permits, waking the draws that wait for them.

count: a scalar >= 0.
)doc");

REGISTER_OP("AdaSamp>CallThenReleaseDrawPermit")
    .Input("permits: resource")
    .Input("args: Tin")
    .Attr("Tin: list(type) >= 0")
    .Attr("f: func")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs)
    .Doc(R"doc(
Runs `f(*args)`, which returns nothing, then adds one permit whether `f`
succeeded or failed, then fails with `f`'s error if it failed.
)doc");

REGISTER_OP("AdaSamp>DrawPermitDataset")
    .Input("input_dataset: variant")
    .Input("permits: resource")
    .Input("initial_permits: int64")
    .Input("timeout_seconds: double")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetTypeConstructor(::tensorflow::full_type::VariadicTensorContainer(
        ::tensorflow::TFT_DATASET, "output_types"))
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
Passes on the elements of `input_dataset`, taking one permit before each and
waiting while there is none. Each iterator starts by setting the count to
`initial_permits`. The wait ends with CancelledError when the iterator above
it is torn down or deleted, and with DeadlineExceededError once it has lasted
`timeout_seconds` (inf, or 1e9 and more: no limit).

initial_permits: a scalar >= 1.
timeout_seconds: a scalar >= 0.
)doc");

}  // namespace adasamp
