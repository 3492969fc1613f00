"""Random-access sources on disk for the adaptive stage (docs/data.md).

The stage draws a batch's indices in TensorFlow; a source then reads just
those records, inside `tf.numpy_function`, in the pipeline's parallel `map`.
Two readers are here: `MemmapSource` over NumPy arrays (memory-mapped with
`np.load(path, mmap_mode="r")`) and `ArrayRecordSource` over ArrayRecord
files, whose package (`array-record`, the `data` extra) is imported only
when one is opened. Any other object with `__len__` and `__getitem__` (and,
for batched reads, `__getitems__`) is read the same way, such as
`tfds.data_source(...)`.

A TFRecord file can only be read in order, so the stage refuses a dataset
that reads one (`refuse_record_streams`); `write_array_record`, or
`python -m tf_adasamp.sources INPUT.tfrecord... OUTPUT.array_record`, copies
its records once into an ArrayRecord file that can be read by index.

The package, one module a purpose (each imported with it; TensorFlow and
array-record are imported only where first used):

  _lazy             TensorFlow and array-record, imported on first use
  _readers          MemmapSource, ArrayRecordSource, index_reader
  _tfrecords        the datasets that read TFRecord files, refused by the
                    stage; the checks of their records' lengths
  _writer           write_array_record
  _image_examples   encode_image_example, decode_image_example,
                    open_image_classification
  _command          the command line (main)
  __main__          `python -m tf_adasamp.sources`
"""

from tf_adasamp.sources._command import main
from tf_adasamp.sources._image_examples import decode_image_example
from tf_adasamp.sources._image_examples import encode_image_example
from tf_adasamp.sources._image_examples import open_image_classification
from tf_adasamp.sources._lazy import DATA_EXTRA
from tf_adasamp.sources._lazy import tf
from tf_adasamp.sources._readers import ArrayRecordSource
from tf_adasamp.sources._readers import index_reader
from tf_adasamp.sources._readers import MemmapSource
from tf_adasamp.sources._readers import stack_records
from tf_adasamp.sources._tfrecords import refuse_record_streams
from tf_adasamp.sources._writer import write_array_record

__all__ = [
    "DATA_EXTRA",
    "tf",
    "MemmapSource",
    "ArrayRecordSource",
    "stack_records",
    "index_reader",
    "refuse_record_streams",
    "write_array_record",
    "encode_image_example",
    "decode_image_example",
    "open_image_classification",
    "main",
]
