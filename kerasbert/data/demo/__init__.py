"""Real demo data shipped with kerasbert, for offline pretraining and fine-tuning.

- a pretraining corpus of English prose from the Python 3.11 documentation (PSF licence);
- a sentence classification set: WordNet 3.0 definitions labelled with their
  lexicographer file, such as noun.animal or verb.motion (WordNet licence).

See README.md in this folder; rebuild with `python -m kerasbert.data.demo.rebuild`.
"""

import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
CORPUS_SHARDS = 4
SPLITS = ("train", "dev", "test")
VOCABULARY_KINDS = ("wordpiece", "byte_pair", "sentence_piece")


def pretraining_corpus_files():
    """Paths of the gzip-compressed corpus shards: one sentence a line, documents split by blank lines.

    >>> import gzip
    >>> from kerasbert.data import demo
    >>> with gzip.open(demo.pretraining_corpus_files()[0], "rt", encoding="utf-8") as f:
    ...     bool(f.readline().strip())
    True
    """
    return [os.path.join(DATA_DIR, "pydocs-%05d-of-%05d.txt.gz" % (shard, CORPUS_SHARDS))
            for shard in range(CORPUS_SHARDS)]


def classification_files():
    """{"train", "dev", "test"} -> path of a gzip-compressed `label<TAB>text` TSV with a header line.

    >>> import gzip
    >>> from kerasbert.data import demo
    >>> with gzip.open(demo.classification_files()["dev"], "rt", encoding="utf-8") as f:
    ...     f.readline()
    'label\\ttext\\n'
    """
    return {split: os.path.join(DATA_DIR, "wordnet_gloss-%s.tsv.gz" % split) for split in SPLITS}


def classification_labels():
    """The 45 label names (WordNet lexicographer files) in their fixed order, label id = index.

    >>> from kerasbert.data import demo
    >>> labels = demo.classification_labels()
    >>> len(labels), labels[0], labels.index("noun.animal")
    (45, 'adj.all', 5)
    """
    with open(os.path.join(DATA_DIR, "wordnet_lexnames.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def vocabulary_dir(kind):
    """The folder of the vocabulary of `kind` trained on the corpus, for `kerasbert.tokenizers.from_hf`.

    >>> from kerasbert.data import demo
    >>> sorted(os.listdir(demo.vocabulary_dir("wordpiece")))
    ['vocab.txt']
    """
    if kind not in VOCABULARY_KINDS:
        raise ValueError(f"Unknown vocabulary kind {kind!r}; expected one of {VOCABULARY_KINDS}")
    return os.path.join(DATA_DIR, "vocab", kind)
