"""The Keras config of a distiller, a model that holds a `teacher` and a `student` model."""

import keras

MODEL_ROLES = ("teacher", "student")


def distiller_config(distiller, **settings):
    """`distiller.get_config()`: its name, `trainable`, its teacher and student serialized, and
    `settings`, its other constructor arguments."""
    return {"name": distiller.name, "trainable": distiller.trainable,
            **{role: keras.layers.serialize(getattr(distiller, role)) for role in MODEL_ROLES},
            **settings}


def constructor_arguments(config):
    """The constructor arguments a `distiller_config` stands for: the models deserialized."""
    return {**config, **{role: keras.layers.deserialize(config[role]) for role in MODEL_ROLES}}
