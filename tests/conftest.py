import os

# Quiet TensorFlow's start-up logging before any test imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
