"""Sentence embedding throughput: kerasbert vs `SentenceTransformer.encode` vs keras-hub's
`BertTextEmbedder`, in one process, on the same weights.

For each shape (`--shapes`: BERT-base, 12 layers x 768, and all-MiniLM-L6-v2's, 6 layers x
384, 12 heads, intermediate 1536; random weights, vocabulary 30522) a transformers `BertModel`
is saved as a sentence-transformers folder (mean pooling, Normalize). Then, embedding the same
`--sentences` corpus sentences (lines of the shipped Python documentation corpus, of their real
lengths, at most `--max_seq_length` tokens) in batches of `--batch_size`:

- kerasbert: the folder through `kerasbert.convert.from_hf`, embedding with
  `TextEmbeddingModel.encode` (sorted by length as sentence-transformers sorts, each batch
  tokenized in the graph and cut to its longest text rounded up to 8 tokens, run by
  `kerasbert.models.inference_function`: XLA in float32); on a CPU with bfloat16 units
  (avx512_bf16 / amx_bf16) also under `mixed_bfloat16` (oneDNN, no XLA), and the faster of the
  two is "ours". Sorting and tokenizing are inside the timed region.
- sentence-transformers: `SentenceTransformer(folder).encode(sentences, batch_size)`, PyTorch
  eager, float32, its own tokenizer and length sorting; `torch.set_num_threads` left at
  PyTorch's default (printed).
- keras-hub: `BertTextEmbedder(BertBackbone(same shape), pooling_mode="mean",
  normalize=True)` with its own random weights (speed does not depend on them; its vectors
  are not compared), fed kerasbert's token ids in batches sorted by token count (longest
  first), each padded to its longest row (keras-hub's preprocessor pads to a fixed length;
  this is the fair, faster way), called through a `tf.function` with XLA; its tokenizer is
  left out of its time (an advantage for keras-hub).

Each system embeds the whole corpus once untimed (tracing, XLA compiling once per shape),
then `--repeats` times timed; sentences per second is the corpus over the median time. The
vectors of ours are compared (minimum cosine similarity to sentence-transformers') so that a
fast wrong answer cannot pass.

Single query: `kerasbert-export` writes the MiniLM-shape model's `model_text.tflite` (raw
text in, normalized vector out); its median latency for one short query ("How do I read a
file line by line?") through `ai_edge_litert`'s interpreter with tensorflow-text's kernels is
compared with `SentenceTransformer.encode` of that one query, both on PyTorch's thread count.

Targets (issue 40): ours >= 1.5x sentence-transformers and >= 1.5x keras-hub (sentences per
second, each shape); the raw-text TFLite file >= 2x sentence-transformers' single-query encode.
A missed target prints MISS with the numbers; the script never fails on it.

    python benchmarks/embedding_throughput.py                 # both shapes, 10,000 sentences
    python benchmarks/embedding_throughput.py --sentences=2000 --shapes=minilm
    python benchmarks/embedding_throughput.py --smoke         # 2 layers x 32, 64 sentences
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.bfloat16 import cpu_bfloat16_flags  # noqa: E402
from kerasbert.data import demo  # noqa: E402
from kerasbert.tokenizers.text_files import iterate_lines  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reporting import SMOKE_HELP, SMOKE_SHAPE, check_line, format_table, smoke_banner  # noqa: E402

SHAPES = {
    "bert_base": {"num_layers": 12, "hidden_size": 768, "num_heads": 12,
                  "intermediate_size": 3072},
    "minilm": {"num_layers": 6, "hidden_size": 384, "num_heads": 12, "intermediate_size": 1536},
}
QUERY = "How do I read a file line by line?"
OURS, ST, KERAS_HUB = "kerasbert", "sentence-transformers", "keras-hub"


def corpus_sentences(count):
    """The first `count` non-blank lines of the shipped corpus (real sentence lengths)."""
    sentences = []
    for line in iterate_lines(demo.pretraining_corpus_files()):
        if line.strip():
            sentences.append(line.strip())
        if len(sentences) == count:
            return sentences
    raise SystemExit(f"the shipped corpus has fewer than {count} lines")


def sentence_transformers_folder(directory, shape, vocabulary_dir):
    """A random BERT of `shape` with the shipped WordPiece vocabulary, saved as a
    sentence-transformers folder (mean pooling, Normalize); returns the folder."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules

    vocabulary = open(os.path.join(vocabulary_dir, "vocab.txt"), encoding="utf-8").read().split()
    config = transformers.BertConfig(
        vocab_size=len(vocabulary), hidden_size=shape["hidden_size"],
        num_hidden_layers=shape["num_layers"], num_attention_heads=shape["num_heads"],
        intermediate_size=shape["intermediate_size"], max_position_embeddings=512)
    torch.manual_seed(0)
    transformer_dir = os.path.join(directory, "transformer")
    transformers.BertModel(config).eval().save_pretrained(transformer_dir)
    tokenizer = transformers.BertTokenizerFast(os.path.join(vocabulary_dir, "vocab.txt"))
    tokenizer.save_pretrained(transformer_dir)
    folder = os.path.join(directory, "sentence_transformers")
    SentenceTransformer(modules=[
        modules.Transformer(transformer_dir, max_seq_length=128),
        modules.Pooling(shape["hidden_size"], pooling_mode="mean"), modules.Normalize()],
        device="cpu").save(folder)
    return folder


def length_sorted_batches(tokenizer, sentences, batch_size, max_seq_length):
    """The sentences sorted by token count (longest first), in batches."""
    lengths = tokenizer.tokenize(sentences).row_lengths().numpy()
    order = np.argsort(-np.minimum(lengths, max_seq_length - 2), kind="stable")
    texts = [sentences[index] for index in order]
    return [texts[start:start + batch_size] for start in range(0, len(texts), batch_size)]


def ours_embed(model, tokenizer, sentences, batch_size):
    """A function embedding `sentences` with kerasbert's `TextEmbeddingModel.encode`."""
    return lambda: model.encode(sentences, tokenizer, batch_size)


def keras_hub_embedder(vocabulary_size, shape):
    """keras-hub's `BertTextEmbedder` of `shape` (its own random weights: speed does not depend
    on them, and its vectors are not compared)."""
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary_size, num_layers=shape["num_layers"],
        num_heads=shape["num_heads"], hidden_dim=shape["hidden_size"],
        intermediate_dim=shape["intermediate_size"], max_sequence_length=512)
    return keras_hub.models.BertTextEmbedder(backbone, pooling_mode="mean", normalize=True)


def keras_hub_embed(embedder, tokenizer, batches, max_seq_length):
    infer = tf.function(lambda inputs: embedder(inputs, training=False), jit_compile=True,
                        reduce_retracing=True)
    packed = [tokenizer(tf.constant(batch), max_length=max_seq_length, padding="longest")
              for batch in batches]

    def embed():
        return np.concatenate([np.asarray(infer(inputs)) for inputs in packed])
    return embed


def timed(function, repeats):
    function()  # untimed: tracing and compiling
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def min_cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.min(np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) /
                        np.linalg.norm(b, axis=1)))


def measure_shape(name, shape, sentences, args, work_dir):
    from sentence_transformers import SentenceTransformer

    vocabulary_dir = demo.vocabulary_dir("wordpiece")
    folder = sentence_transformers_folder(os.path.join(work_dir, name), shape, vocabulary_dir)
    reference_model = SentenceTransformer(folder, device="cpu")
    tokenizer = kerasbert.tokenizers.from_hf(folder)
    batches = length_sorted_batches(tokenizer, sentences, args.batch_size,
                                           args.max_seq_length)
    rows, vectors = {}, {}
    st_seconds, st_vectors = timed(lambda: reference_model.encode(
        sentences, batch_size=args.batch_size, convert_to_numpy=True), args.repeats)
    rows[ST] = st_seconds
    policies = ["float32"] + (["mixed_bfloat16"] if cpu_bfloat16_flags() else [])
    for policy in policies:
        keras.config.set_dtype_policy(policy)
        model = kerasbert.convert.from_hf(folder)
        seconds, result = timed(ours_embed(model, tokenizer, sentences, args.batch_size),
                                args.repeats)
        label = f"{OURS} ({policy})"
        rows[label], vectors[label] = seconds, result
    keras.config.set_dtype_policy("float32")
    model = kerasbert.convert.from_hf(folder)
    seconds, _ = timed(keras_hub_embed(keras_hub_embedder(model.encoder.config.vocab_size, shape),
                                       tokenizer, batches, args.max_seq_length), args.repeats)
    rows[KERAS_HUB] = seconds
    cosines = {label: min_cosine(value, st_vectors) for label, value in vectors.items()}
    ours = min((label for label in rows if label.startswith(OURS)), key=rows.get)
    cosines[ST] = 1.0
    table = [[label, f"{len(sentences) / seconds:,.1f}", f"{seconds:.2f}",
              f"{cosines[label]:.6f}" if label in cosines else "n/a"]
             for label, seconds in rows.items()]
    print(f"\n{name}: {shape}; {len(sentences)} sentences, batch {args.batch_size}, "
          f"max_seq_length {args.max_seq_length}")
    print(format_table(["system", "sentences/s", "median s", "min cosine to ST"], table,
                       args.markdown))
    for peer in (ST, KERAS_HUB):
        ratio = rows[peer] / rows[ours]
        print(check_line(f"{name}: {ours} >= 1.5x {peer}", ratio >= 1.5, f"{ratio:.2f}x"))
    return folder, reference_model, model, tokenizer


def single_query(folder, reference_model, model, tokenizer, args, work_dir):
    from ai_edge_litert.interpreter import InterpreterWithCustomOps
    import tensorflow_text

    output = os.path.join(work_dir, "export")
    kerasbert.export.export(model, output, formats=("tflite",), max_seq_length=args.max_seq_length,
                            text_signatures=True, tokenizer=tokenizer)
    interpreter = InterpreterWithCustomOps(
        model_path=os.path.join(output, "model_text.tflite"),
        custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
        num_threads=torch.get_num_threads())  # as many threads as PyTorch's
    runner = interpreter.get_signature_runner("serve_text")
    query = np.array([QUERY], dtype=object)
    calls = max(args.repeats, 20)
    tflite_seconds, phone = timed(lambda: [runner(text=query) for _ in range(calls)][-1],
                                  args.repeats)
    st_seconds, theirs = timed(lambda: [reference_model.encode([QUERY]) for _ in range(calls)][-1],
                               args.repeats)
    ratio = st_seconds / tflite_seconds
    print(f"\nsingle query {QUERY!r}: model_text.tflite {1000 * tflite_seconds / calls:.2f} ms, "
          f"SentenceTransformer.encode {1000 * st_seconds / calls:.2f} ms; cosine "
          f"{min_cosine(phone['embedding'], theirs):.6f}")
    print(check_line("raw-text TFLite >= 2x sentence-transformers, one query", ratio >= 2,
                     f"{ratio:.2f}x"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="bert_base,minilm")
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    shapes = {name: SHAPES[name] for name in args.shapes.split(",")}
    if args.smoke:
        print(smoke_banner())
        shapes = {"smoke": SMOKE_SHAPE}
        args.sentences, args.repeats = 64, 1
    print(f"CPU bfloat16 flags: {', '.join(cpu_bfloat16_flags()) or 'none'}; "
          f"os.cpu_count() = {os.cpu_count()}; torch threads {torch.get_num_threads()}; "
          f"tensorflow {tf.__version__}, keras {keras.__version__}, keras-hub "
          f"{keras_hub.__version__}, torch {torch.__version__}")
    sentences = corpus_sentences(args.sentences)
    with tempfile.TemporaryDirectory() as work_dir:
        last = None
        for name, shape in shapes.items():
            last = measure_shape(name, shape, sentences, args, work_dir)
        single_query(*last, args, work_dir)


if __name__ == "__main__":
    main()
