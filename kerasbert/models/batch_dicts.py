"""Training on batch dicts: a model mixin that splits kerasbert's data batches for Keras."""

import keras


class BatchDictTraining:
    """Lets `fit` / `evaluate` / `predict` take a batch dict of inputs and labels as it is.

    A model using it defines `split_batch(batch) -> (inputs, labels[, sample_weights])`
    (anything else returned unchanged) and `_input_names`; keys of a dict that are not
    inputs (labels, bookkeeping) are left out when the model is called. Keras' own build of a
    model under a `tf.distribute` strategy reads a first batch too: it gets the
    split batch as well.

    >>> import kerasbert
    >>> issubclass(kerasbert.models.TaskModel, BatchDictTraining)
    True
    """

    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, dict):  # a whole batch: labels and bookkeeping are not inputs
            inputs = {name: value for name, value in inputs.items() if name in self._input_names}
        return super().__call__(inputs, *args, **kwargs)

    def train_step(self, data):
        return super().train_step(self.split_batch(data))

    def test_step(self, data):
        return super().test_step(self.split_batch(data))

    def predict_step(self, data):
        if isinstance(data, dict):
            data = {name: data[name] for name in self._input_names}
        return super().predict_step(data)

    def _symbolic_build(self, iterator=None, data_batch=None):
        if data_batch is not None:
            data_batch = self.split_batch(data_batch)
        return super()._symbolic_build(iterator=iterator, data_batch=data_batch)


def restore_compile(model, config):
    """`compile_from_config` for a model with its own `compile`, which Keras does not restore
    on load: the stored arguments are ones that `compile` accepts."""
    model.compile(**keras.saving.deserialize_keras_object(config))
    if model.built:
        model.optimizer.build(model.trainable_variables)
