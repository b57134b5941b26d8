"""Inference latency of a BERT-base encoder: kerasbert vs keras-hub vs Hugging Face PyTorch.

Measures, in one process on CPU, the latency of one forward pass of a randomly
initialized BERT-base encoder (kerasbert preset "bert_base_uncased": 12 layers,
hidden 768, 12 heads, intermediate 3072, vocab 30522) for each batch size and
sequence length asked for, with the same random token ids everywhere:

- kerasbert: `kerasbert.models.inference_function(encoder)` (XLA, the default),
  and the same with `jit_compile=False`;
- keras-hub `BertBackbone` in a `tf.function`, without and with XLA;
- transformers `BertModel` on PyTorch, eager, `torch.inference_mode()`, with
  the default attention implementation and `torch.set_num_threads(os.cpu_count())`.

Each one is called twice to warm up (tracing and compilation happen there), then
timed over N calls; the median is reported. A timed call includes copying the
sequence output to the host. The table gives seconds per call and two ratios
(other time / kerasbert time: above 1 means kerasbert is faster), followed by
the two targets checked at batch 1, sequence 128.

Run from the repository root:

    python benchmarks/encoder_latency.py                 # batch 1 and 8, seq 128 and 512
    python benchmarks/encoder_latency.py --quick         # batch 1, seq 128, 2 repeats
    python benchmarks/encoder_latency.py --smoke         # as --quick, 2 layers, hidden 32: runs?
    python benchmarks/encoder_latency.py --markdown      # the table as Markdown
    python benchmarks/encoder_latency.py --batch_sizes 1 --seq_lengths 128 256 --repeats 20
"""

import argparse
import gc
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # hide TensorFlow's INFO logs

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import kerasbert  # noqa: E402

from reporting import (SMOKE_HELP, SMOKE_SHAPE, check_line, format_table,  # noqa: E402
                       median_seconds, smoke_banner)

PRESET = "bert_base_uncased"
VOCAB, MAX_LENGTH = 30522, 512
BERT_BASE = {"num_layers": 12, "hidden_size": 768, "num_heads": 12, "intermediate_size": 3072}
WARMUP = 2
OURS, KERAS_HUB_XLA, PYTORCH = "kerasbert", "keras-hub XLA", "PyTorch eager"
COLUMNS = (OURS, "kerasbert no-XLA", "keras-hub plain", KERAS_HUB_XLA, PYTORCH)


def default_repeats(batch, seq):
    """Timed calls per shape: fewer for shapes as large as batch 8 x seq 512."""
    return 10 if batch * seq < 4096 else 3


def random_inputs(batch, seq):
    """The same numpy inputs for every implementation: random ids, one segment, no padding."""
    token_ids = np.random.default_rng(0).integers(0, VOCAB, size=(batch, seq), dtype=np.int32)
    return token_ids, np.zeros_like(token_ids), np.ones_like(token_ids)


def to_tf(token_ids, segment_ids, padding_mask):
    return {"token_ids": tf.constant(token_ids), "segment_ids": tf.constant(segment_ids),
            "padding_mask": tf.constant(padding_mask)}


def to_torch(token_ids, segment_ids, padding_mask):
    return {"input_ids": torch.from_numpy(token_ids).long(),
            "token_type_ids": torch.from_numpy(segment_ids).long(),
            "attention_mask": torch.from_numpy(padding_mask).long()}


def tf_runner(function):
    return lambda inputs: function(inputs)["sequence_output"].numpy()


def kerasbert_family(shape):
    encoder = kerasbert.zoo.build(PRESET, **shape)
    infer = kerasbert.models.inference_function
    note = "kerasbert: inference_function(encoder), XLA by default; no-XLA: jit_compile=False"
    return to_tf, {
        OURS: tf_runner(infer(encoder)),
        "kerasbert no-XLA": tf_runner(infer(encoder, jit_compile=False)),
    }, note


def keras_hub_family(shape):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=shape["num_layers"], num_heads=shape["num_heads"],
        hidden_dim=shape["hidden_size"], intermediate_dim=shape["intermediate_size"],
        max_sequence_length=MAX_LENGTH)

    def call(inputs):
        return backbone(inputs, training=False)

    note = "keras-hub: BertBackbone in tf.function, plain and with jit_compile=True"
    return to_tf, {
        "keras-hub plain": tf_runner(tf.function(call)),
        KERAS_HUB_XLA: tf_runner(tf.function(call, jit_compile=True)),
    }, note


def pytorch_family(shape):
    torch.set_num_threads(os.cpu_count())
    config = transformers.BertConfig(
        vocab_size=VOCAB, num_hidden_layers=shape["num_layers"],
        num_attention_heads=shape["num_heads"], hidden_size=shape["hidden_size"],
        intermediate_size=shape["intermediate_size"], max_position_embeddings=MAX_LENGTH)
    model = transformers.BertModel(config).eval()
    note = (f"PyTorch: transformers BertModel, eager, torch.inference_mode(), torch threads = "
            f"os.cpu_count() = {torch.get_num_threads()}, attention implementation "
            f"{model.config._attn_implementation!r}")

    def run(inputs):
        with torch.inference_mode():
            return model(**inputs).last_hidden_state.numpy()

    return to_torch, {PYTORCH: run}, note


def measure(shapes, repeats, model_shape):
    """Seconds per call, `{(batch, seq): {column: seconds}}`, and one note per model family.

    Builds one model family at a time (of `model_shape`: layers, hidden size, heads and
    intermediate size) and frees it before the next.
    """
    results, notes = {shape: {} for shape in shapes}, []
    for family in (kerasbert_family, keras_hub_family, pytorch_family):
        convert, runners, note = family(model_shape)
        notes.append(note)
        for batch, seq in shapes:
            inputs = convert(*random_inputs(batch, seq))
            for name, run in runners.items():
                print(f"  {name}: batch {batch}, seq {seq} ...", file=sys.stderr, flush=True)
                results[batch, seq][name] = median_seconds(run, inputs, repeats[batch, seq],
                                                           WARMUP)
        del convert, runners, inputs
        keras.backend.clear_session()
        gc.collect()
    return results, notes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seq_lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--repeats", type=int,
                        help="timed calls per shape (default: 10, or 3 when batch x seq >= 4096)")
    parser.add_argument("--quick", action="store_true", help="batch 1, seq 128, 2 repeats")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--smoke", action="store_true",
                        help=SMOKE_HELP + " (--quick with 2 layers, hidden 32)")
    args = parser.parse_args()
    model_shape, model_name = BERT_BASE, "BERT-base"
    if args.smoke:
        print(smoke_banner())
        model_shape, model_name, args.quick = SMOKE_SHAPE, "SMOKE-SIZED BERT", True
    if args.quick:
        args.batch_sizes, args.seq_lengths, args.repeats = [1], [128], 2

    shapes = [(batch, seq) for batch in args.batch_sizes for seq in args.seq_lengths]
    repeats = {shape: args.repeats or default_repeats(*shape) for shape in shapes}
    results, notes = measure(shapes, repeats, model_shape)

    header = ["batch x seq", "repeats", *(f"{name} (s)" for name in COLUMNS),
              "keras-hub XLA / ours", "PyTorch / ours"]
    rows = [[f"{batch} x {seq}", str(repeats[batch, seq]),
             *(f"{times[name]:.4f}" for name in COLUMNS),
             f"{times[KERAS_HUB_XLA] / times[OURS]:.2f}x", f"{times[PYTORCH] / times[OURS]:.2f}x"]
            for (batch, seq), times in results.items()]

    print(f"{model_name} ({PRESET}, {model_shape}, random weights), CPU, {os.cpu_count()} "
          f"cores; median seconds per call after {WARMUP} warm-up calls, sequence output copied "
          "to host.")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, keras-hub "
          f"{keras_hub.__version__}, kerasbert {kerasbert.__version__}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}.")
    print(f"TensorFlow: default thread pools (intra-op "
          f"{tf.config.threading.get_intra_op_parallelism_threads()}, inter-op "
          f"{tf.config.threading.get_inter_op_parallelism_threads()}; 0 = all cores).")
    for note in notes:
        print(note + ".")
    print("Ratios: other time / kerasbert time (above 1: kerasbert is faster).")
    print()
    print(format_table(header, rows, args.markdown))
    print()
    times = results.get((1, 128))
    if times is None:
        print("Targets (batch 1, seq 128): not measured.")
        return
    print("Targets (batch 1, seq 128):")
    hub_ratio, torch_ratio = times[KERAS_HUB_XLA] / times[OURS], times[PYTORCH] / times[OURS]
    print(check_line("ours at least as fast as keras-hub XLA", hub_ratio >= 1.0,
                     f"keras-hub XLA / ours = {hub_ratio:.2f}x"))
    print(check_line("ours >= 1.3x faster than PyTorch eager", torch_ratio >= 1.3,
                     f"PyTorch / ours = {torch_ratio:.2f}x"))


if __name__ == "__main__":
    main()
