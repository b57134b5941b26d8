"""The main job's `curves.png`: the pretraining loss and accuracies, and both fine-tuning arms'
training loss and dev accuracy, read from the TensorBoard logs the binaries wrote."""

import tensorflow as tf
from matplotlib.figure import Figure  # a figure of its own writes files with no backend chosen

from kerasbert import file_system
from kerasbert.atomic_files import atomic_path

ARMS = ("pretrained", "from_scratch")


def read_scalars(log_dir):
    """`{tag: [(step, value), ...]}` of the scalar summaries in TensorBoard log folder `log_dir`.

    >>> import tempfile
    >>> log_dir = tempfile.mkdtemp()
    >>> with tf.summary.create_file_writer(log_dir).as_default():
    ...     _ = [tf.summary.write("loss", 1.0 / step, step=step) for step in (1, 2)]
    >>> read_scalars(log_dir)
    {'loss': [(1, 1.0), (2, 0.5)]}
    """
    scalars = {}
    files = file_system.glob(file_system.join(log_dir, "events.out.tfevents.*"))
    for record in tf.data.TFRecordDataset(files):
        event = tf.compat.v1.Event.FromString(record.numpy())
        for value in event.summary.value:
            number = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                      else value.simple_value)
            scalars.setdefault(value.tag, []).append((int(event.step), number))
    return {tag: sorted(points) for tag, points in scalars.items()}


def draw_curves(run_dir, path):
    """Draw the run's curves into the PNG file `path`; return `path`."""
    pretraining = read_scalars(file_system.join(run_dir, "pretrain", "train"))
    finetuning = {arm: (read_scalars(file_system.join(run_dir, f"finetune_{arm}", "train")),
                        read_scalars(file_system.join(run_dir, f"finetune_{arm}", "eval")))
                  for arm in ARMS}
    figure = Figure(figsize=(18, 4), constrained_layout=True)
    loss_axis, accuracy_axis, finetune_axis, dev_axis = figure.subplots(1, 4)
    _plot(loss_axis, pretraining, ("loss", "mlm_logits_loss", "nsp_logits_loss"),
          "pretraining loss")
    _plot(accuracy_axis, pretraining, ("mlm_logits_accuracy", "nsp_logits_accuracy"),
          "pretraining accuracy")
    for arm, (train, _) in finetuning.items():
        _plot(finetune_axis, train, ("loss",), "fine-tuning training loss", label=arm)
    for arm, (_, dev) in finetuning.items():
        _plot(dev_axis, dev, ("accuracy",), "fine-tuning dev accuracy (per epoch)", label=arm,
              marker="o")
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=90)
    return path


def _plot(axis, scalars, tags, title, label=None, marker=None):
    for tag in tags:
        points = scalars.get(tag)
        if points:
            steps, values = zip(*points)
            axis.plot(steps, values, label=label or tag, marker=marker)
    axis.set_title(title)
    axis.set_xlabel("step")
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize="small")
