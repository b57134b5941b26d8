"""CoNLL-2003: reading files, labels aligned to sub-tokens as transformers aligns them, windows
over long sentences, reassembly to one tag per word, and the conlleval predictions file."""

import os
import re

import numpy as np
import pytest
import sentencepiece
import seqeval.metrics
import tensorflow as tf
import transformers

import kerasbert.data.demo
import kerasbert.zoo
from kerasbert.data.conll import (ConllSentence, conll_dataset, conll_labels, predicted_tags,
                                  read_conll, write_conll_predictions)
from kerasbert.data.task_errors import TaskDataError
from kerasbert.data.token_windows import word_predictions, word_windows
from kerasbert.training.entity_metrics import entity_scores

WORDPIECE = kerasbert.data.demo.vocabulary_dir("wordpiece")
BYTE_PAIR = kerasbert.data.demo.vocabulary_dir("byte_pair")
SENTENCE_PIECE = kerasbert.data.demo.vocabulary_dir("sentence_piece")

# The start of the English CoNLL-2003 training file as released (IOB1, `word POS chunk tag`),
# with names the demo vocabularies split into several sub-tokens.
IOB1_TEXT = """-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
to TO I-VP O
boycott VB I-VP O
British JJ I-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O

The DT I-NP O
European NNP I-NP I-ORG
Commission NNP I-NP I-ORG
said VBD I-VP O
Germany NNP I-NP I-LOC
and CC O O
France NNP I-NP B-LOC
disagreed VBD I-VP O
"""
# Gold tags of the words whose sub-tokens are compared with transformers below.
ALIGNMENT_SENTENCES = [
    ("Guido van Rossum created CPython in Amsterdam ; Düsseldorf U.S. asyncio Pythonic Zürich",
     "B-PER I-PER I-PER O B-MISC O B-LOC O B-LOC B-LOC O B-MISC B-LOC"),
    ("Peter Blackburn", "B-PER I-PER"),
    ("EU rejects German call to boycott British lamb .",
     "B-ORG O B-MISC O O O B-MISC O O"),
]
LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def _sentences(pairs):
    return [ConllSentence(tuple(words.split()), tuple(tags.split()), "test", 1)
            for words, tags in pairs]


def _windows(tokenizer, sentences, max_seq_length, overlap=None):
    """`word_windows` of `sentences`, run eagerly (`conll_dataset` runs it in tf.data), as numpy."""
    words = tf.ragged.constant([list(s.words) for s in sentences], tf.string)
    tag_ids = tf.ragged.constant([[LABELS.index(t) for t in s.tags] for s in sentences], tf.int32)
    windows = word_windows(words, tag_ids, tf.range(len(sentences)), tokenizer, max_seq_length,
                           overlap)
    return {name: value.numpy() for name, value in windows.items()}


def _write(tmp_path, text, name="train.txt", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return str(path)


@pytest.fixture(scope="module")
def bert():
    return kerasbert.zoo.build_tokenizer("bert_tiny_uncased", WORDPIECE)


@pytest.fixture(scope="module")
def roberta():
    return kerasbert.zoo.build_tokenizer("roberta_base", BYTE_PAIR)


@pytest.fixture(scope="module")
def albert():
    return kerasbert.zoo.build_tokenizer("albert_base_v2", SENTENCE_PIECE)


@pytest.fixture(scope="module")
def hf_bert():
    # transformers 5 takes `vocab=`; it silently ignores `vocab_file=` and keeps 5 special tokens.
    tokenizer = transformers.BertTokenizerFast(vocab=os.path.join(WORDPIECE, "vocab.txt"))
    assert len(tokenizer) == sum(1 for _ in open(os.path.join(WORDPIECE, "vocab.txt")))
    return tokenizer


@pytest.fixture(scope="module")
def hf_roberta():
    tokenizer = transformers.RobertaTokenizerFast(
        vocab=os.path.join(BYTE_PAIR, "vocab.json"), merges=os.path.join(BYTE_PAIR, "merges.txt"),
        add_prefix_space=True)
    assert len(tokenizer) > 1000
    return tokenizer


# --- reading ---

@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_reads_iob1_release_format_with_documents_and_line_numbers(tmp_path, newline):
    sentences = read_conll(_write(tmp_path, IOB1_TEXT, newline=newline))
    assert [s.words for s in sentences] == [
        ("EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."),
        ("Peter", "Blackburn"), ("BRUSSELS", "1996-08-22"),
        ("The", "European", "Commission", "said", "Germany", "and", "France", "disagreed")]
    assert sentences[1].tags == ("I-PER", "I-PER")
    assert sentences[3].tags[-2:] == ("B-LOC", "O")
    assert [s.line for s in sentences] == [3, 13, 18, 21]
    assert all(s.source == str(tmp_path / "train.txt") for s in sentences)


def test_reads_two_column_copies_and_a_file_without_final_newline(tmp_path):
    path = _write(tmp_path, "Peter B-PER\nBlackburn I-PER\n\n\n\nsaid O")
    sentences = read_conll(path, labels=["O", "B-PER", "I-PER"], columns=2)
    assert [(s.words, s.tags, s.line) for s in sentences] == [
        (("Peter", "Blackburn"), ("B-PER", "I-PER"), 1), (("said",), ("O",), 6)]


def test_docstart_ends_a_sentence_without_a_blank_line(tmp_path):
    path = _write(tmp_path, "EU NNP I-NP I-ORG\n-DOCSTART- -X- -X- O\nPeter NNP I-NP I-PER\n")
    assert [s.words for s in read_conll(path)] == [("EU",), ("Peter",)]


@pytest.mark.parametrize("text, line, message", [
    ("EU NNP I-NP I-ORG\nrejects VBZ O\n", 2, "expected 4 whitespace-separated columns, got 3"),
    ("EU NNP I-NP I-ORG\n\nPeter NNP I-NP I-PER extra\n", 3, "got 5"),
    ("EU NNP I-NP ORG\n", 1, "tag 'ORG' is neither O nor"),
    ("EU NNP I-NP I-\n", 1, "tag 'I-' is neither O nor"),
    ("EU NNP I-NP I-ORG\nPeter NNP I-NP I-PER\n", 2, "unknown tag 'I-PER'"),
    ("", 1, "no sentences"),
    ("-DOCSTART- -X- -X- O\n\n\n", 1, "no sentences"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    pattern = rf"^{re.escape(path)} line {line}: .*{message}"
    with pytest.raises(TaskDataError, match=pattern) as error:
        read_conll(path, labels=["O", "B-ORG", "I-ORG"])
    assert "\n" not in str(error.value)


def test_text_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "deu.train"
    path.write_bytes("Köln NE I-NC I-LOC\n\nMünchen NE I-NC I-LOC\n".encode("latin-1"))
    with pytest.raises(TaskDataError, match=rf"^{re.escape(str(path))} line 1: not utf-8 text"):
        read_conll(str(path))
    assert read_conll(str(path), encoding="latin-1")[1].words == ("München",)


def test_label_list_is_stable_and_completes_iob1_types(tmp_path):
    sentences = read_conll(_write(tmp_path, IOB1_TEXT))
    # The file has no B-MISC, B-ORG nor B-PER: they are in the list all the same.
    assert conll_labels(sentences) == LABELS
    assert conll_labels(sentences[::-1]) == LABELS
    iobes = _sentences([("EU Peter Blackburn", "S-ORG B-PER E-PER")])
    assert conll_labels(iobes) == ["O", "B-ORG", "I-ORG", "E-ORG", "S-ORG",
                                   "B-PER", "I-PER", "E-PER", "S-PER"]


def test_dev_tag_missing_from_the_labels_names_its_line(tmp_path, bert):
    sentences = read_conll(_write(tmp_path, IOB1_TEXT, name="dev.txt"))
    with pytest.raises(TaskDataError, match=r"dev.txt line 27: unknown tag 'B-LOC'"):
        conll_dataset(sentences, bert, ["O", "I-LOC", "I-MISC", "I-ORG", "I-PER"])


def test_bad_label_lists_and_no_sentences_are_refused(bert):
    sentences = _sentences(ALIGNMENT_SENTENCES[1:2])
    for labels, message in (([], "empty"), (["O", "PER"], "neither O"),
                            (["O", "B-PER", "O"], "twice")):
        with pytest.raises(ValueError, match=message):
            conll_dataset(sentences, bert, labels)
    with pytest.raises(ValueError, match="at least one sentence"):
        conll_dataset([], bert, LABELS)


# --- sub-tokens and labels, as transformers aligns them ---

def _hf_alignment(hf_tokenizer, sentence, max_seq_length):
    """transformers' ids and labels of a pre-split sentence: the first sub-token of each word."""
    encoding = hf_tokenizer(list(sentence.words), is_split_into_words=True,
                            max_length=max_seq_length, padding="max_length", truncation=True)
    labels, previous = [], None
    for word in encoding.word_ids():
        first = word is not None and word != previous
        labels.append(LABELS.index(sentence.tags[word]) if first else -100)
        previous = word
    return encoding, labels


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_labels_on_first_sub_tokens_equal_transformers(family, request):
    tokenizer = request.getfixturevalue(family)
    hf_tokenizer = request.getfixturevalue(f"hf_{family}")
    sentences = _sentences(ALIGNMENT_SENTENCES)
    batch = _windows(tokenizer, sentences, max_seq_length=48)
    assert len(batch["token_ids"]) == len(sentences)
    for row, sentence in enumerate(sentences):
        encoding, labels = _hf_alignment(hf_tokenizer, sentence, 48)
        assert batch["token_ids"][row].tolist() == encoding["input_ids"]
        assert batch["padding_mask"][row].tolist() == encoding["attention_mask"]
        assert batch["segment_ids"][row].tolist() == encoding.get("token_type_ids", [0] * 48)
        assert batch["labels"][row].tolist() == labels
    # The comparison means something: names are split, and their later sub-tokens are ignored.
    ignored = (batch["labels"] == -100) & (batch["padding_mask"] == 1)
    assert ignored.sum() - 2 * len(sentences) >= 10


def test_sentence_piece_words_are_tokenized_one_by_one(albert):
    processor = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(SENTENCE_PIECE, "spiece.model"))
    sentence = _sentences([("Peter Blackburn visited Amsterdam", "B-PER I-PER O B-LOC")])[0]
    batch = _windows(albert, [sentence], max_seq_length=24)
    pieces = [processor.encode(word.lower()) for word in sentence.words]
    assert max(len(p) for p in pieces) > 1
    expected_ids, expected_labels = [albert.cls_token_id], [-100]
    for word_pieces, tag in zip(pieces, sentence.tags):
        expected_ids += word_pieces
        expected_labels += [LABELS.index(tag)] + [-100] * (len(word_pieces) - 1)
    expected_ids.append(albert.sep_token_id)
    expected_labels.append(-100)
    padding = 24 - len(expected_ids)
    assert batch["token_ids"][0].tolist() == expected_ids + [albert.pad_token_id] * padding
    assert batch["labels"][0].tolist() == expected_labels + [-100] * padding


def test_a_word_without_sub_tokens_becomes_unknown_and_is_still_predicted(bert):
    # WordPiece drops zero-width spaces: transformers gives such a word no token and no label.
    sentence = _sentences([("Peter \u200b Blackburn", "B-PER O I-PER")])[0]
    batch = _windows(bert, [sentence], max_seq_length=16)
    word_index = batch["word_index"][0].tolist()
    assert sorted(set(word_index)) == [-1, 0, 1, 2]
    position = word_index.index(1)
    assert batch["token_ids"][0, position] == bert.unk_token_id
    assert batch["token_ids"][0, position + 1] != bert.unk_token_id
    assert batch["labels"][0, position] == LABELS.index("O")


# --- windows over long sentences ---

def _long_sentence(repeats=4):
    words, tags = [], []
    for _ in range(repeats):
        for words_text, tags_text in ALIGNMENT_SENTENCES:
            words += words_text.split()
            tags += tags_text.split()
    return ConllSentence(tuple(words), tuple(tags), "long.txt", 1)


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("max_seq_length, overlap", [(16, 4), (16, 0), (16, 13), (11, 3)])
def test_windows_equal_transformers_overflowing_windows(family, max_seq_length, overlap, request):
    """`overlap` is transformers' `stride`: the same windows of the same sub-tokens."""
    tokenizer = request.getfixturevalue(family)
    hf_tokenizer = request.getfixturevalue(f"hf_{family}")
    sentence = _long_sentence(2)
    windows = _windows(tokenizer, [sentence], max_seq_length, overlap)
    reference = hf_tokenizer(list(sentence.words), is_split_into_words=True,
                             max_length=max_seq_length, truncation=True, stride=overlap,
                             return_overflowing_tokens=True, padding="max_length")
    assert len(reference["input_ids"]) > 5
    assert windows["token_ids"].tolist() == reference["input_ids"]
    assert windows["padding_mask"].tolist() == reference["attention_mask"]


@pytest.mark.parametrize("max_seq_length, overlap", [(16, 4), (16, 0), (16, 13), (11, None)])
def test_every_word_is_predicted_by_one_window_with_most_context(bert, max_seq_length, overlap):
    sentences = [_long_sentence(), _sentences(ALIGNMENT_SENTENCES[1:2])[0], _long_sentence(1)]
    windows = _windows(bert, sentences, max_seq_length, overlap)
    capacity = max_seq_length - 2
    step = capacity - (capacity // 2 if overlap is None else overlap)
    for number, sentence in enumerate(sentences):
        rows = np.flatnonzero(windows["example_index"] == number)
        # All sub-tokens of the sentence, and for each window where its first sub-token sits.
        full = bert.tokenize([" ".join(sentence.words)]).to_list()[0]
        assert len(rows) == (1 if len(full) <= capacity
                             else 1 + -(-(len(full) - capacity) // step))
        predicted_by = {}
        for k, row in enumerate(rows):
            length = windows["padding_mask"][row].sum() - 2
            assert length == min(capacity, len(full) - k * step)
            assert windows["token_ids"][row, 1:1 + length].tolist() == \
                full[k * step:k * step + length]
            for position in np.flatnonzero(windows["word_index"][row] >= 0):
                word = windows["word_index"][row, position]
                predicted_by.setdefault(word, []).append((k, position - 1))
                assert windows["labels"][row, position] == LABELS.index(sentence.tags[word])
        assert sorted(predicted_by) == list(range(len(sentence.words)))
        assert all(len(owners) == 1 for owners in predicted_by.values())
        # No other window holding the word's first sub-token gives it more context.
        for [(k, local)] in predicted_by.values():
            token = k * step + local
            best = max(min(token - j * step, min(j * step + capacity, len(full)) - 1 - token)
                       for j in range(len(rows)) if j * step <= token < j * step + capacity)
            assert min(local, windows["padding_mask"][rows[k]].sum() - 3 - local) == best


@pytest.mark.slow
def test_perfect_logits_give_every_word_its_tag_and_shifted_ones_do_not(roberta):
    sentences = [_long_sentence(), _sentences(ALIGNMENT_SENTENCES[:1])[0]]
    dataset = conll_dataset(sentences, roberta, LABELS, batch_size=4, max_seq_length=16,
                            overlap=5)
    labels = np.concatenate([batch["labels"].numpy() for batch in dataset])
    assert len(labels) > 10
    perfect = np.eye(len(LABELS))[np.maximum(labels, 0)]
    tags = predicted_tags(sentences, LABELS, perfect, dataset)
    assert [len(t) for t in tags] == [len(s.words) for s in sentences]
    assert tags == [list(s.tags) for s in sentences]
    gold = [list(s.tags) for s in sentences]
    assert entity_scores(gold, tags)["f1"] == 1.0
    # Labels one sub-token to the right: each word reads its neighbour's first sub-token.
    shifted = np.eye(len(LABELS))[np.maximum(np.roll(labels, 1, axis=1), 0)]
    shifted_tags = predicted_tags(sentences, LABELS, shifted, dataset)
    assert [len(t) for t in shifted_tags] == [len(s.words) for s in sentences]
    scores = entity_scores(gold, shifted_tags)
    assert scores["f1"] < 0.9
    assert scores["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, shifted_tags))


def test_reassembly_refuses_windows_of_other_sentences(bert):
    sentences = [_long_sentence(1)]
    windows = _windows(bert, sentences, 16, 4)
    logits = np.zeros(windows["token_ids"].shape + (len(LABELS),))
    with pytest.raises(ValueError, match="predicted by 0 windows"):
        word_predictions(logits[1:], windows["example_index"][1:], windows["word_index"][1:],
                         [len(sentences[0].words)])
    with pytest.raises(ValueError, match="predicted by 2 windows"):
        word_predictions(np.concatenate([logits, logits[:1]]),
                         np.concatenate([windows["example_index"], [0]]),
                         np.concatenate([windows["word_index"], windows["word_index"][:1]]),
                         [len(sentences[0].words)])
    with pytest.raises(ValueError, match="do not match"):
        word_predictions(logits[:, :8], windows["example_index"], windows["word_index"], [30])


def test_overlap_and_length_are_checked(bert):
    sentences = _sentences(ALIGNMENT_SENTENCES[1:2])
    with pytest.raises(ValueError, match=r"overlap must be in \[0, 14\)"):
        conll_dataset(sentences, bert, LABELS, max_seq_length=16, overlap=14)
    with pytest.raises(ValueError, match="no room"):
        conll_dataset(sentences, bert, LABELS, max_seq_length=2)


# --- batches ---

@pytest.mark.slow
def test_batches_follow_the_contract_and_equal_the_windows(bert, tmp_path):
    sentences = read_conll(_write(tmp_path, IOB1_TEXT)) + [_long_sentence()]
    batches = list(conll_dataset(sentences, bert, LABELS, batch_size=4, max_seq_length=16))
    for batch in batches:
        for name in ("token_ids", "segment_ids", "padding_mask", "labels", "word_index"):
            assert batch[name].dtype == tf.int32 and batch[name].shape[1] == 16
        assert batch["example_index"].dtype == tf.int32
    assert [b["token_ids"].shape[0] for b in batches[:-1]] == [4] * (len(batches) - 1)
    windows = _windows(bert, sentences, max_seq_length=16)
    assert sorted(windows) == sorted(batches[0])
    for name, value in windows.items():
        assert np.concatenate([b[name].numpy() for b in batches]).tolist() == value.tolist()


@pytest.mark.slow
def test_shuffling_is_deterministic_under_a_seed_and_reshuffles_each_epoch(bert, tmp_path):
    sentences = read_conll(_write(tmp_path, IOB1_TEXT)) + [_long_sentence()]
    windows = [row.tolist() for row in _windows(bert, sentences, max_seq_length=16)["token_ids"]]

    def epochs(dataset, count):
        return [[row.tolist() for batch in dataset for row in batch["token_ids"].numpy()]
                for _ in range(count)]

    first, second = epochs(conll_dataset(sentences, bert, LABELS, batch_size=4,
                                         max_seq_length=16, shuffle=True, seed=1,
                                         drop_remainder=True), 2)
    assert len(first) == len(second) == len(windows) // 4 * 4
    assert first != second and first != windows[:len(first)]
    again, = epochs(conll_dataset(sentences, bert, LABELS, batch_size=4, max_seq_length=16,
                                  shuffle=True, seed=1), 1)
    assert again[:len(first)] == first
    assert sorted(again) == sorted(windows)


# --- the predictions file ---

def test_predictions_file_is_what_conlleval_reads(tmp_path):
    sentences = read_conll(_write(tmp_path, IOB1_TEXT))
    predictions = [list(s.tags) for s in sentences]
    predictions[1] = ["B-PER", "O"]
    path = str(tmp_path / "out" / "dev_predictions.txt")
    assert write_conll_predictions(path, sentences, predictions) == path
    assert os.listdir(tmp_path / "out") == ["dev_predictions.txt"]
    blocks = open(path, encoding="utf-8").read().split("\n\n")
    assert len(blocks) == len(sentences)
    assert blocks[1] == "Peter I-PER B-PER\nBlackburn I-PER O"
    rows = [line.split(" ") for block in blocks for line in block.strip("\n").split("\n")]
    assert rows[0] == ["EU", "I-ORG", "I-ORG"]
    assert len(rows) == sum(len(s.words) for s in sentences) and all(len(r) == 3 for r in rows)


def test_predictions_must_match_the_sentences(tmp_path):
    sentences = _sentences(ALIGNMENT_SENTENCES[1:2])
    with pytest.raises(ValueError, match="1 sentences but 2"):
        write_conll_predictions(str(tmp_path / "p.txt"), sentences, [["O", "O"], ["O"]])
    with pytest.raises(ValueError, match="2 words but 1 predicted"):
        write_conll_predictions(str(tmp_path / "p.txt"), sentences, [["O"]])
    assert not os.listdir(tmp_path)
