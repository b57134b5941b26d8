"""Length-bucketed fine-tuning: wall-clock per epoch (train + evaluate), ours bucketed vs ours
fixed vs keras-hub `BertTextClassifier.fit`.

Texts are cut from the shipped pretraining corpus (`kerasbert.data.demo`) to three length
profiles that stand for GLUE tasks (word pieces per example, packed, at `--max_seq_length`):

- cola: single sentences, about 11 word pieces on average;
- sst2: single sentences, about 25;
- mnli: pairs (premise about 27, hypothesis about 13), about 40.

Lengths are drawn from a gamma distribution (shape 2) around each mean, in whitespace words,
so the measured means (printed) are those of the tokenized texts. Labels are random:
the benchmark times work, it does not learn.

One process, CPU, randomly initialized models of the `--preset` shape (default
`bert_base_uncased`: 12 layers, hidden 768), the same AdamW settings for all (peak 2e-5, linear
warm-up on the first 10% of the steps then decay, weight decay 0.01, global norm 1.0):

- ours bucketed: `kerasbert.data.glue.examples_dataset(..., shuffle=True)` (length buckets, the
  default) into `TaskModel.fit`, then `evaluate` on the dev examples' bucketed batches;
- ours fixed: the same with `length_buckets=False` (every batch padded to `--max_seq_length`);
- keras-hub: `BertTextClassifier(BertBackbone(same shape), preprocessor=None)` fed
  `(inputs, labels)` padded to `--max_seq_length` (its preprocessor pads every batch to its fixed
  `sequence_length`; the benchmark gives it `--max_seq_length`, not its default 512), `fit`
  then `evaluate`.

Every model runs one untimed epoch first (tracing, and XLA compilation of each bucket), then
`--epochs` timed epochs; the figure is the median epoch (fit + evaluate, wall-clock). Keras's
`jit_compile` is its default ("auto") for all; `--jit_compile` sets XLA for all. Ratios are the
peer's seconds over ours bucketed (above 1: ours bucketed is faster). Targets: >= 3x keras-hub
on cola, >= 2x on sst2, >= 1.5x on mnli. The exit status is non-zero only on errors.

    python benchmarks/length_buckets.py                       # BERT-base, 3 profiles, long
    python benchmarks/length_buckets.py --smoke               # tiny model, cola only: runs?
    python benchmarks/length_buckets.py --preset=bert_small_uncased --train_examples=256
"""

import argparse
import dataclasses
import gzip
import os
import platform
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.data import demo, glue, glue_tasks, length_buckets  # noqa: E402

from reporting import check_line, format_table, smoke_banner  # noqa: E402

LEARNING_RATE, WEIGHT_DECAY, CLIPNORM, WARMUP_FRACTION = 2e-5, 0.01, 1.0, 0.1
OURS_BUCKETED, OURS_FIXED, HUB = "ours bucketed", "ours fixed", "keras-hub"
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


@dataclasses.dataclass(frozen=True)
class Profile:
    """A length profile: its name, the GLUE task whose file layout and labels its examples
    take, the mean words of text_a (and text_b), the speed target against keras-hub."""

    name: str
    task: str
    words_a: float
    words_b: float
    target: float


# Means in whitespace words; the demo corpus gives about 1.3 word pieces a word.
PROFILES = {"cola": Profile("cola", "cola", 7.0, 0.0, 3.0),
            "sst2": Profile("sst2", "sst2", 17.0, 0.0, 2.0),
            "mnli": Profile("mnli", "mnli", 19.0, 9.0, 1.5)}


def corpus_words(limit=200_000):
    """Whitespace words of the shipped pretraining corpus, in order."""
    words = []
    for path in demo.pretraining_corpus_files():
        with gzip.open(path, "rt", encoding="utf-8") as file:
            for line in file:
                words.extend(line.split())
                if len(words) >= limit:
                    return words
    return words


def make_examples(profile, count, words, seed):
    """`count` GlueExamples (MNLI layout for pairs, SST-2's otherwise) of the profile's lengths."""
    rng = np.random.default_rng(seed)

    def text(mean):
        length = max(1, int(round(rng.gamma(2.0, mean / 2.0))))
        start = int(rng.integers(0, len(words) - length))
        return " ".join(words[start:start + length])
    labels = glue_tasks.get_task(profile.task).labels
    return [glue.GlueExample(str(number), text(profile.words_a),
                             text(profile.words_b) if profile.words_b else None,
                             labels[int(rng.integers(0, len(labels)))], number + 2)
            for number in range(count)]


def optimizer_for(steps):
    warmup = int(WARMUP_FRACTION * steps)
    return kerasbert.training.create_optimizer(
        "adamw", LEARNING_RATE, num_train_steps=steps, num_warmup_steps=warmup,
        weight_decay=WEIGHT_DECAY, global_clipnorm=CLIPNORM)


def build_ours(config, num_labels, steps, jit_compile):
    model = kerasbert.models.build_task_model(config, "sequence_classification",
                                              num_labels=num_labels)
    model.compile(optimizer=optimizer_for(steps), jit_compile=jit_compile)
    return model


def build_keras_hub(config, num_labels, steps, jit_compile):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=config.max_positions, num_segments=config.type_vocab_size)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=num_labels,
                                                preprocessor=None, dropout=config.dropout)
    warmup = int(WARMUP_FRACTION * steps)
    optimizer = keras.optimizers.AdamW(
        kerasbert.training.WarmupDecay(LEARNING_RATE, warmup, steps - warmup),
        weight_decay=WEIGHT_DECAY, global_clipnorm=CLIPNORM)
    optimizer.exclude_from_weight_decay(var_names=list(kerasbert.training.NO_DECAY_PATTERNS))
    model.compile(optimizer=optimizer, jit_compile=jit_compile)
    return model


def as_keras_hub(dataset):
    """Task batches as `BertTextClassifier` takes them: `(inputs, labels)`."""
    return dataset.map(lambda batch: ({name: batch[name] for name in
                                       ("token_ids", "segment_ids", "padding_mask")},
                                      batch["labels"]))


def epoch_seconds(model, train, dev, epochs):
    """Median wall-clock seconds of `epochs` timed epochs (fit on `train`, evaluate on `dev`),
    after one untimed epoch, and the untimed epoch's seconds."""
    def epoch():
        start = time.perf_counter()
        model.fit(train, epochs=1, verbose=0, shuffle=False)
        model.evaluate(dev, verbose=0)
        return time.perf_counter() - start
    first = epoch()
    return statistics.median(epoch() for _ in range(epochs)), first


def measure(profile, arguments, config, tokenizer, words):
    train_examples = make_examples(profile, arguments.train_examples, words, seed=1)
    dev_examples = make_examples(profile, arguments.dev_examples, words, seed=2)
    task = profile.task
    num_labels = glue_tasks.get_task(task).num_labels
    steps = -(-arguments.train_examples // arguments.batch_size) * (arguments.epochs + 1)

    def batches(examples, buckets, training):
        return glue.examples_dataset(task, examples, tokenizer, arguments.max_seq_length,
                                     arguments.batch_size, shuffle=training, seed=0,
                                     length_buckets=buckets)
    mean_length = float(np.mean(length_buckets.packed_lengths(
        tokenizer, [e.text_a for e in train_examples],
        [e.text_b for e in train_examples] if profile.words_b else None,
        arguments.max_seq_length, truncation="longest_first")))
    seconds = {}
    for name, buckets in ((OURS_BUCKETED, True), (OURS_FIXED, False), (HUB, False)):
        keras.utils.set_random_seed(0)
        train = batches(train_examples, buckets, True)
        dev = batches(dev_examples, buckets, False)
        if name == HUB:
            model = build_keras_hub(config, num_labels, steps, arguments.jit_compile)
            train, dev = as_keras_hub(train), as_keras_hub(dev)
        else:
            model = build_ours(config, num_labels, steps, arguments.jit_compile)
        seconds[name] = epoch_seconds(model, train, dev, arguments.epochs)
        del model
        keras.backend.clear_session()
    return mean_length, seconds


def cpu_summary():
    with open("/proc/cpuinfo") as file:
        info = file.read()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                  if line.startswith("model name")), platform.processor())
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines()
                      if line.startswith("flags")), []))
    present = [flag.upper() for flag in CPU_FLAGS if flag in flags]
    return f"{os.cpu_count()} cores, {model}; flags: {' '.join(present) or 'none of AVX2+'}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert_base_uncased")
    parser.add_argument("--profiles", nargs="+", choices=sorted(PROFILES),
                        default=["cola", "sst2", "mnli"])
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--train_examples", type=int, default=1024)
    parser.add_argument("--dev_examples", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs (after one untimed)")
    parser.add_argument("--jit_compile", action="store_const", const=True, default="auto")
    parser.add_argument("--smoke", action="store_true",
                        help="that the script runs, in seconds: a tiny model, a few examples, "
                             "the cola profile only")
    parser.add_argument("--markdown", action="store_true")
    arguments = parser.parse_args()
    if arguments.smoke:
        arguments.train_examples, arguments.dev_examples, arguments.epochs = 32, 16, 1
        arguments.batch_size, arguments.profiles = 8, ["cola"]
        print(smoke_banner())
    print(f"CPU: {cpu_summary()}; TensorFlow {tf.__version__}, Keras {keras.__version__}, "
          f"keras-hub {keras_hub.__version__}; load average {os.getloadavg()}")
    tokenizer = kerasbert.zoo.build_tokenizer("bert_base_uncased",
                                              demo.vocabulary_dir("wordpiece"))
    overrides = dict(vocab_size=tokenizer.vocabulary_size(),
                     max_positions=max(512, arguments.max_seq_length))
    if arguments.smoke:
        overrides.update(num_layers=2, hidden_size=32, num_heads=2, intermediate_size=64)
    config = kerasbert.zoo.get_config(arguments.preset).replace(**overrides)
    print(f"Model: {arguments.preset}{' (smoke: tiny)' if arguments.smoke else ''}, "
          f"{config.num_layers} layers, hidden {config.hidden_size}; max_seq_length "
          f"{arguments.max_seq_length}, batch {arguments.batch_size}, "
          f"{arguments.train_examples} training + {arguments.dev_examples} dev examples, "
          f"jit_compile={arguments.jit_compile}")
    words = corpus_words()
    rows, checks = [], []
    for name in arguments.profiles:
        profile = PROFILES[name]
        mean_length, seconds = measure(profile, arguments, config, tokenizer, words)
        ours = seconds[OURS_BUCKETED][0]
        rows.append([name, f"{mean_length:.1f}",
                     *(f"{seconds[key][0]:.2f}" for key in (OURS_BUCKETED, OURS_FIXED, HUB)),
                     f"{seconds[OURS_FIXED][0] / ours:.2f}x", f"{seconds[HUB][0] / ours:.2f}x",
                     f"{seconds[OURS_BUCKETED][1]:.1f}"])
        ratio = seconds[HUB][0] / ours
        checks.append(check_line(f"{name}: ours bucketed >= {profile.target}x keras-hub",
                                 ratio >= profile.target, f"{ratio:.2f}x"))
    print(format_table(["profile", "mean tokens", f"{OURS_BUCKETED} s/epoch",
                        f"{OURS_FIXED} s/epoch", f"{HUB} s/epoch", "vs fixed", "vs keras-hub",
                        "bucketed first epoch s"], rows, arguments.markdown))
    print("\n".join(checks))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
