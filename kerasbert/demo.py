"""The main job, for now: each family's smallest preset, run on shipped-corpus text, saved and reloaded."""

import dataclasses
import itertools
import os
import tempfile

import keras
import numpy as np

from kerasbert import zoo
from kerasbert.config import FAMILIES
from kerasbert.data import demo
from kerasbert.models.inference import inference_function
from kerasbert.tokenizers.text_files import iterate_lines


@dataclasses.dataclass
class DemoRow:
    """One line of the main job's table.

    Example:
    >>> print(format_table([DemoRow("bert_tiny_uncased", 4385920, {"pooled_output": (2, 128)}, 0.0)]))
    preset             parameters  output shapes           reload max-diff
    -----------------  ----------  ----------------------  ---------------
    bert_tiny_uncased  4,385,920   pooled_output (2, 128)  0.00e+00
    """

    preset: str
    parameters: int
    output_shapes: dict
    reload_max_diff: float


def smallest_presets():
    """The preset with the fewest parameters in each family (from the config, without building)."""
    chosen = {}
    for name in zoo.list_presets():
        config = zoo.get_config(name)
        size = _approximate_parameters(config)
        if config.family not in chosen or size < chosen[config.family][1]:
            chosen[config.family] = (name, size)
    return [chosen[family][0] for family in FAMILIES if family in chosen]


def _approximate_parameters(config):
    embeddings = (config.vocab_size + config.max_positions + config.type_vocab_size) * config.embedding_size
    layer = 4 * config.hidden_size ** 2 + 2 * config.hidden_size * config.intermediate_size
    return embeddings + config.num_distinct_layers * layer


def corpus_sentences(count):
    """The first `count` sentences of the shipped pretraining corpus."""
    return list(itertools.islice(iterate_lines(demo.pretraining_corpus_files()), count))


def run_preset(name, work_dir, batch_size=2, seq_length=16):
    """Build preset `name`, run a batch of shipped-corpus sentence pairs through it (tokenized by
    the preset's tokenizer over the vocabulary shipped for its kind), save and reload it as
    `.keras`; return a `DemoRow`."""
    encoder = zoo.build(name)
    tokenizer = zoo.build_tokenizer(name, demo.vocabulary_dir(zoo.tokenizer_spec(name).kind))
    sentences = corpus_sentences(2 * batch_size)
    packed = tokenizer(sentences[:batch_size], sentences[batch_size:], max_length=seq_length)
    inputs = {key: value.numpy() for key, value in packed.items()}
    outputs = inference_function(encoder)(inputs)

    path = os.path.join(work_dir, f"{name}.keras")
    encoder.save(path)
    reloaded = keras.models.load_model(path)
    reloaded_outputs = reloaded(inputs, training=False)
    max_diff = max(float(np.max(np.abs(np.asarray(outputs[key]) - np.asarray(reloaded_outputs[key]))))
                   for key in outputs)
    shapes = {key: tuple(value.shape) for key, value in outputs.items()}
    return DemoRow(name, encoder.count_params(), shapes, max_diff)


def run_demo(presets=None, work_dir=None):
    """Run `run_preset` over `presets` (default: each family's smallest); return the rows."""
    presets = presets or smallest_presets()
    with tempfile.TemporaryDirectory() as scratch:
        return [run_preset(name, work_dir or scratch) for name in presets]


def format_table(rows):
    """The rows as an aligned text table."""
    header = ("preset", "parameters", "output shapes", "reload max-diff")
    lines = [(row.preset, f"{row.parameters:,}",
              ", ".join(f"{key} {shape}" for key, shape in row.output_shapes.items()),
              f"{row.reload_max_diff:.2e}") for row in rows]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines)]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip()
                     for line in [header, tuple("-" * w for w in widths), *lines])
