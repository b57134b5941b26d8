"""Tokenize + pack throughput: kerasbert vs the `tokenizers` library vs keras-hub, per family.

Takes 20,000 sentences of the shipped corpus, and for each tokenizer family
(WordPiece, byte-level BPE, SentencePiece, with the vocabularies shipped in
`kerasbert/data/demo/vocab/`) times, in one process, how many sentences per
second each implementation turns into padded `[batch, 128]` model inputs
(ids, segments, mask), in batches:

- kerasbert: the tokenizer called in a `tf.function` (`tok(batch, max_length=128)`);
- `tokenizers` (Rust, Hugging Face's fast tokenizers): `encode_batch` with
  truncation and padding to 128, as used by `transformers`;
- keras-hub: its tokenizer for the family plus `StartEndPacker`, in a
  `tf.function` (the TensorFlow path used inside `tf.data`).

Each is run once to warm up, then timed over all batches; the table prints
sentences/s and the ratios ours / peer. Targets: WordPiece at least 4x
`tokenizers` and at least 1.5x keras-hub (issue 42; printed as PASS / MISS);
BPE and SentencePiece at least 0.5x of `tokenizers`, BPE at least 5x keras-hub.

    python benchmarks/tokenizer_throughput.py               # all families
    python benchmarks/tokenizer_throughput.py --families wordpiece --batch_size 512
    python benchmarks/tokenizer_throughput.py --smoke   # 64 sentences, batches of 32: runs?
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras_hub  # noqa: E402
import tensorflow as tf  # noqa: E402

from kerasbert.data import demo  # noqa: E402
from kerasbert.tokenizers import from_hf  # noqa: E402
from kerasbert.tokenizers.text_files import iterate_lines  # noqa: E402

from reporting import SMOKE_HELP, check_line, smoke_banner  # noqa: E402

MAX_LENGTH = 128
WORDPIECE_TARGETS = {"tokenizers": 4.0, "keras-hub": 1.5}


def corpus_sentences(count):
    sentences = list(iterate_lines(demo.pretraining_corpus_files()))
    while len(sentences) < count:
        sentences += sentences
    return sentences[:count]


def time_batches(run, batches):
    run(batches[0])
    start = time.perf_counter()
    for batch in batches:
        run(batch)
    return time.perf_counter() - start


def ours_runner(directory):
    tokenizer = from_hf(directory)
    packed = tf.function(lambda texts: tokenizer(texts, max_length=MAX_LENGTH),
                         input_signature=[tf.TensorSpec([None], tf.string)])
    return lambda batch: packed(tf.constant(batch))["token_ids"].numpy(), tokenizer


def rust_runner(tokenizer):
    tokenizer.enable_truncation(MAX_LENGTH)
    tokenizer.enable_padding(length=MAX_LENGTH, pad_id=0)
    return lambda batch: [encoding.ids for encoding in tokenizer.encode_batch(batch)]


def keras_hub_runner(keras_hub_tokenizer, ours):
    packer = keras_hub.layers.StartEndPacker(
        sequence_length=MAX_LENGTH, start_value=ours.cls_token_id, end_value=ours.sep_token_id,
        pad_value=ours.pad_token_id)
    packed = tf.function(lambda texts: packer(keras_hub_tokenizer(texts)),
                         input_signature=[tf.TensorSpec([None], tf.string)])
    return lambda batch: packed(tf.constant(batch)).numpy()


def wordpiece_runners():
    from tokenizers import BertWordPieceTokenizer

    directory = demo.vocabulary_dir("wordpiece")
    ours, tokenizer = ours_runner(directory)
    rust = BertWordPieceTokenizer(os.path.join(directory, "vocab.txt"), lowercase=True)
    hub = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=tokenizer.vocabulary, lowercase=True, strip_accents=True)
    return {"kerasbert": ours, "tokenizers": rust_runner(rust),
            "keras-hub": keras_hub_runner(hub, tokenizer)}


def sentence_piece_runners():
    import transformers

    directory = demo.vocabulary_dir("sentence_piece")
    ours, tokenizer = ours_runner(directory)
    # transformers converts spiece.model into a `tokenizers` Unigram tokenizer (the Rust peer).
    rust = transformers.AlbertTokenizer.from_pretrained(directory).backend_tokenizer
    hub = keras_hub.tokenizers.SentencePieceTokenizer(proto=tokenizer.proto)
    return {"kerasbert": ours, "tokenizers": rust_runner(rust),
            "keras-hub": keras_hub_runner(hub, tokenizer)}


def byte_pair_runners():
    from tokenizers import ByteLevelBPETokenizer

    directory = demo.vocabulary_dir("byte_pair")
    ours, tokenizer = ours_runner(directory)
    rust = ByteLevelBPETokenizer(os.path.join(directory, "vocab.json"),
                                 os.path.join(directory, "merges.txt"))
    hub = keras_hub.tokenizers.BytePairTokenizer(
        vocabulary=os.path.join(directory, "vocab.json"),
        merges=os.path.join(directory, "merges.txt"))
    return {"kerasbert": ours, "tokenizers": rust_runner(rust),
            "keras-hub": keras_hub_runner(hub, tokenizer)}


FAMILIES = {"wordpiece": wordpiece_runners, "byte_pair": byte_pair_runners,
            "sentence_piece": sentence_piece_runners}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        print(smoke_banner())
        args.sentences, args.batch_size = 64, 32

    sentences = corpus_sentences(args.sentences)
    batches = [sentences[i:i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]
    print(f"{len(sentences)} corpus sentences, batches of {args.batch_size}, padded to {MAX_LENGTH}; "
          f"{os.cpu_count()} CPU cores; sentences per second (higher is better).")
    print(f"{'family':<16}{'kerasbert':>12}{'tokenizers':>12}{'keras-hub':>12}"
          f"{'ours/tokenizers':>17}{'ours/keras-hub':>16}")
    measured = {}
    for family in args.families:
        rates = {name: len(sentences) / time_batches(run, batches)
                 for name, run in FAMILIES[family]().items()}
        print(f"{family:<16}{rates['kerasbert']:>12.0f}{rates['tokenizers']:>12.0f}"
              f"{rates['keras-hub']:>12.0f}{rates['kerasbert'] / rates['tokenizers']:>16.2f}x"
              f"{rates['kerasbert'] / rates['keras-hub']:>15.2f}x")
        measured[family] = rates
    if "wordpiece" in measured:
        rates = measured["wordpiece"]
        for peer, target in WORDPIECE_TARGETS.items():
            ratio = rates["kerasbert"] / rates[peer]
            print(check_line(f"WordPiece >= {target}x {peer}", ratio >= target, f"{ratio:.2f}x"))


if __name__ == "__main__":
    main()
