"""Test-wide set-up: quiet TensorFlow logs, no hub access, two logical CPU devices for distribution tests."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# transformers' `from_pretrained` is only ever given local directories the tests wrote; offline
# mode makes any attempt to reach the Hugging Face hub fail instead of downloading.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import tensorflow as tf  # noqa: E402

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
