"""Embedding a list of texts fast, as `SentenceTransformer.encode` does: tokenized once, sorted
by length (in tokens, longest first), batched, each batch packed in the graph and cut to its
longest text rounded up to a multiple of `PAD_MULTIPLE` tokens, run by `inference_function`
(XLA in float32, oneDNN's kernels under bfloat16 on a CPU), and returned in the order given."""

import weakref

import numpy as np
import tensorflow as tf

from kerasbert.models.inference import inference_function
from kerasbert.tokenizers.packing import pack as pack_ids

# Batches are padded to a multiple of this many tokens: close to their longest text, and few
# distinct shapes for XLA to compile.
PAD_MULTIPLE = 8

_FUNCTIONS = weakref.WeakKeyDictionary()  # model -> {(tokenizer id, max length): function}


def encode_texts(model, tokenizer, texts, batch_size=32, max_seq_length=None):
    """`model`'s `embedding` of each of `texts` (a string or a list of strings): float32
    `[len(texts), dim]`, row `i` for `texts[i]`.

    Each text is truncated to `max_seq_length` tokens (default: the model's `max_seq_length`,
    else its encoder's positions). Longest texts first, `batch_size` at a time.

    Example:
    >>> import kerasbert
    >>> from kerasbert.data import demo
    >>> tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1,
    ...                               vocab_size=tokenizer.vocabulary_size())
    >>> model = kerasbert.models.build_task_model(encoder, "text_embedding", normalize=True)
    >>> encode_texts(model, tokenizer, ["a cat", "the dog barked twice", ""], 2).shape
    (3, 128)
    """
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    texts = list(texts)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    limit = model.encoder.config.max_sequence_length
    max_seq_length = max_seq_length or model.max_seq_length or limit
    if not 2 < max_seq_length <= limit:
        raise ValueError(f"max_seq_length must be in [3, {limit}] for {model.name}, "
                         f"got {max_seq_length}")
    if not texts:
        return np.zeros((0, model.embedding_size), np.float32)
    embed = _embedding_function(model, tokenizer, max_seq_length)
    ids = tokenizer.tokenize(tf.constant(texts))  # once: for the order and for the batches
    order = np.argsort(-np.minimum(ids.row_lengths().numpy(), max_seq_length), kind="stable")
    vectors = np.empty((len(texts), model.embedding_size), np.float32)
    for start in range(0, len(texts), batch_size):
        rows = order[start:start + batch_size]
        vectors[rows] = embed(tf.gather(ids, rows)).numpy()
    return vectors


def _embedding_function(model, tokenizer, max_seq_length):
    """The traced function from a batch of ragged token ids to float32 vectors, made once per model,
    tokenizer and length."""
    functions = _FUNCTIONS.setdefault(model, {})
    key = (id(tokenizer), max_seq_length)
    if key not in functions:
        infer = inference_function(model)

        def pack(ids):
            packed = pack_ids(ids, None, tokenizer.layout, max_length=max_seq_length)
            longest = tf.reduce_max(tf.reduce_sum(packed["padding_mask"], axis=1))
            width = tf.minimum(-(-longest // PAD_MULTIPLE) * PAD_MULTIPLE, max_seq_length)
            return {name: value[:, :width] for name, value in packed.items()}

        @tf.function(reduce_retracing=True, autograph=False)
        def embed(ids):
            return tf.cast(infer(pack(ids))["embedding"], tf.float32)

        functions[key] = (tokenizer, embed)  # the tokenizer kept alive while its id is a key
    return functions[key][1]
