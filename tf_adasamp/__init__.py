"""tf_adasamp: adaptive sampling SGD as graph-native TensorFlow ops.

London, "A PAC-Bayesian Analysis of Randomized Learning with Application to
SGD", NIPS 2017: sample training examples from a data-dependent distribution
kept in an in-graph sum-tree, and reweight the drawn examples by a utility.
"""

from tf_adasamp import bounds
from tf_adasamp import data
from tf_adasamp import distribute
from tf_adasamp import utilities
from tf_adasamp.sampler import AdaptiveSampler
from tf_adasamp.sum_tree import SumTree

__all__ = ["AdaptiveSampler", "SumTree", "bounds", "data", "distribute",
           "utilities"]
__version__ = "0.1.0"
