"""The trainer: one run of adaptive or uniform sampling SGD.

  config            TrainConfig: a run's settings (no TensorFlow)
  datasets          in-memory data sets
  disk_data         training images in ArrayRecord files (--data_path)
  models            the models, each mapping images to logits
  loop              train(config): builds a run's parts and runs it
  steps             one step of Algorithm 1 in one tf.function
  trainer           steps_per_execution steps in one call
  evaluator         the metric record at an evaluation point
  controller        the schedule, checkpoints, records, summaries
  summaries         TensorBoard summaries
  resume            which checkpoint a run (or worker) resumes from
  components        the run's strategy, sampler and optimizer
  uniform_sampler   uniform draws from the sampler's random stream
  run_files         a run's directory, read and written without TensorFlow
  cluster           a multi-worker cluster that can always be left
  cluster_watchdog  ends a trainer whose cluster has not formed in time
  irreducible       the irreducible losses of the reducible-loss utility
  progress          the progress bar
"""
