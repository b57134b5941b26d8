"""The inputs every artifact is checked on: packed text (or, without a tokenizer, ids laid out
the same way) at batch 1 and 3, two sequence lengths, single texts and pairs, right padding;
and the texts that calibrate full-integer quantization and, disjoint from them, the texts
quantized artifacts are judged on."""

import contextlib
import dataclasses
import gzip
import itertools

import numpy as np

from kerasbert import file_system
from kerasbert.data import demo
from kerasbert.export.errors import ExportError
from kerasbert.models.tasks import encoder_of

SHORT_LENGTH = 16
PADDING_EXTRA = 8
MASKED_POSITIONS = 3
# Full-integer quantization calibrates on the first CALIBRATION_TEXTS texts of the text source;
# quantized artifacts are judged on up to AGREEMENT_TEXTS texts after them (never one of the
# calibration texts, compared as strings and as packed ids), and on at least MIN_JUDGING_INPUTS
# inputs: with 256, the 99% agreement rule allows two flips; with fewer than 100 it would allow
# none, and with a handful one lucky input could decide.
CALIBRATION_TEXTS = 64
AGREEMENT_TEXTS = 256
MIN_JUDGING_INPUTS = 200
QUESTION_WORDS = 12  # a span-QA judging input: the first words of one text, then the next text
# The corpus shard that pretraining tests hold out: text the demo models never trained on.
_HELD_OUT_SHARD = -1


@dataclasses.dataclass
class Case:
    """One verification input: `inputs` (int32 arrays by input name) and, for the padding
    check, `padded_from` (the name of the case this one pads further).

    >>> Case("batch1", {"token_ids": np.ones((1, 4), "int32")}).batch_size
    1
    """

    name: str
    inputs: dict
    padded_from: str = None

    @property
    def batch_size(self):
        return len(next(iter(self.inputs.values())))


@dataclasses.dataclass
class TextSets:
    """The texts of an export: `calibration` (full-integer quantization's, possibly empty) and
    `judging` (where quantized artifacts are judged), both from `source`; no judging text is
    one of the calibration texts.

    >>> sets = text_sets(None, calibrate=True)
    >>> len(sets.calibration), len(sets.judging), bool(set(sets.calibration) & set(sets.judging))
    (64, 256, False)
    """

    source: list
    calibration: list
    judging: list
    dropped: int = 0

    def describe(self):
        """What the report says of the two sets: their source, sizes and which non-empty lines
        of the source they are."""
        calibrated = len(self.calibration)
        last = calibrated + len(self.judging) + self.dropped
        return {"calibration": {"source": self.source, "texts": calibrated,
                                "non_empty_lines": f"1-{calibrated}" if calibrated else None},
                "judging": {"source": self.source, "texts": len(self.judging),
                            "non_empty_lines": f"{calibrated + 1}-{last}",
                            "left_out_as_calibration_texts": self.dropped}}


def text_sets(paths=None, calibrate=False):
    """The `TextSets` of the text files `paths` (or of the shipped corpus's held-out shard when
    None): with `calibrate`, the first `CALIBRATION_TEXTS` non-empty lines calibrate; the
    judging texts are up to `AGREEMENT_TEXTS` lines after them, leaving out any line equal to a
    calibration text."""
    source = [str(path) for path in paths] if paths else [
        demo.pretraining_corpus_files()[_HELD_OUT_SHARD]]
    calibration_count = CALIBRATION_TEXTS if calibrate else 0
    texts = read_texts(source, calibration_count + AGREEMENT_TEXTS)
    calibration = texts[:calibration_count]
    if calibrate and len(calibration) < CALIBRATION_TEXTS:
        raise ExportError(f"calibration data {source}: {len(texts)} non-empty lines; int8 "
                          f"calibrates on {CALIBRATION_TEXTS} and is judged on the lines after "
                          "them, so give more text")
    seen = set(calibration)
    judging = [text for text in texts[calibration_count:] if text not in seen]
    if not judging:
        raise ExportError(f"calibration data {source}: no text left to judge quantized artifacts "
                          f"on after the {calibration_count} calibration lines; give more text")
    return TextSets(source, calibration, judging,
                    len(texts) - calibration_count - len(judging))


def read_texts(paths=None, count=AGREEMENT_TEXTS):
    """Up to `count` non-empty lines of `paths` (plain or `.gz` text files), or of the shipped
    corpus's held-out shard when `paths` is None.

    >>> len(read_texts(count=5))
    5
    """
    paths = list(paths) if paths else [demo.pretraining_corpus_files()[_HELD_OUT_SHARD]]
    texts = []
    for path in paths:
        try:
            with _open_text(str(path)) as file:
                texts += [line.strip() for line in itertools.islice(
                    (line for line in file if line.strip()), count - len(texts))]
        except (OSError, UnicodeDecodeError) as error:
            raise ExportError(f"calibration data {path}: cannot read it ({error})") from None
        if len(texts) >= count:
            break
    if not texts:
        raise ExportError(f"calibration data {paths}: no text lines")
    return texts


@contextlib.contextmanager
def _open_text(path):
    """A plain or `.gz` UTF-8 text file opened for reading, on any file system."""
    if not path.endswith(".gz"):
        with file_system.open_file(path, "r", encoding="utf-8") as file:
            yield file
        return
    with file_system.open_file(path, "rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as file:
        yield file


class CaseMaker:
    """Packs texts (or makes ids) shaped for `model`'s inputs.

    Example (no tokenizer: random ids in the packed layout):
    >>> import kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> maker = CaseMaker(encoder, None, max_seq_length=32)
    >>> [(case.name, case.inputs["token_ids"].shape) for case in maker.verification_cases()]
    [('batch1_single_len16', (1, 16)), ('batch3_pairs_len32', (3, 32)), ('batch3_single_len16', (3, 16)), ('batch1_single_len16_padded_len24', (1, 24))]
    """

    def __init__(self, model, tokenizer, max_seq_length, sets=None, seed=0):
        self.config = encoder_of(model).config
        self.input_names = list(model.input)
        self.choices = len(model.input["token_ids"].shape) == 3
        self.task = getattr(model, "task", None)
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.sets = sets or text_sets()
        self.texts = self.sets.judging
        self.rng = np.random.default_rng(seed)

    # --- the cases ---

    def verification_cases(self):
        """Batch 1 and 3, a short and the full length, singles and pairs, and the padding case."""
        short = min(SHORT_LENGTH, self.max_seq_length)
        long = self.max_seq_length
        cases = [Case(f"batch1_single_len{short}", self.packed(self.texts[:1], None, short)),
                 Case(f"batch3_pairs_len{long}",
                      self.packed(self.texts[1:4], self.texts[4:7], long)),
                 Case(f"batch3_single_len{short}", self.packed(self.texts[7:10], None, short))]
        padded_length = min(short + PADDING_EXTRA, self.config.max_sequence_length)
        if padded_length > short:
            cases.append(Case(f"{cases[0].name}_padded_len{padded_length}",
                              self.pad_to(cases[0].inputs, padded_length),
                              padded_from=cases[0].name))
        return cases

    def judging_inputs(self, batch_size=AGREEMENT_TEXTS):
        """Where quantized artifacts are judged without a labelled set: one input per judging
        text, packed at the full length and shaped like the task's inputs (module docstring
        of `kerasbert.export.cases`: `judging_shape`), none equal in its ids to a calibration
        input, in batches; an `ExportError` when fewer than `MIN_JUDGING_INPUTS` are left."""
        texts = self.texts
        if len(texts) < MIN_JUDGING_INPUTS:
            self._too_few(len(texts))
        following = texts[1:] + texts[:1]
        shape = self.judging_shape()
        if shape == "question and context pairs":
            rows = self.packed([" ".join(text.split()[:QUESTION_WORDS]) + "?" for text in texts],
                               following, self.max_seq_length)
        elif shape == "single texts and text pairs, alternating":
            singles = self.packed(texts[0::2], None, self.max_seq_length)
            pairs = self.packed(texts[1::2], following[1::2], self.max_seq_length)
            rows = {name: _interleaved(singles[name], pairs[name]) for name in singles}
        else:
            rows = self.packed(texts, None, self.max_seq_length)
        rows = self._without_calibration_inputs(rows)
        count = len(rows["token_ids"])
        if count < MIN_JUDGING_INPUTS:
            self._too_few(count)
        return [{name: value[start:start + batch_size] for name, value in rows.items()}
                for start in range(0, count, batch_size)]

    def latency_input(self):
        """One text packed at the full length: where artifacts' latency is measured."""
        return self.packed(self.texts[:1], None, self.max_seq_length)

    def _too_few(self, count):
        raise ExportError(
            f"calibration data {self.sets.source}: {count} judging inputs left after the "
            f"{len(self.sets.calibration)} calibration lines; quantized variants are judged on "
            f"at least {MIN_JUDGING_INPUTS}: give more lines in --calibration_data (or judge on "
            "a labelled file with --eval_file and --task)")

    def judging_shape(self):
        """How judging texts become inputs for this model: `"single texts"` (encoders,
        pretraining and token classification models: a sentence's words), `"question and
        context pairs"` (span QA) or `"single texts and text pairs, alternating"` (sequence
        classification and multiple choice, which take either)."""
        if self.task == "question_answering":
            return "question and context pairs"
        if self.task in ("sequence_classification", "multiple_choice"):
            return "single texts and text pairs, alternating"
        return "single texts"

    def _without_calibration_inputs(self, rows):
        """`rows` without any whose ids equal a calibration input's."""
        if not self.sets.calibration:
            return rows
        calibration = self.packed(self.sets.calibration, None, self.max_seq_length)["token_ids"]
        seen = {row.tobytes() for row in calibration.reshape(len(calibration), -1)}
        ids = rows["token_ids"]
        keep = np.array([row.tobytes() not in seen for row in ids.reshape(len(ids), -1)])
        return {name: value[keep] for name, value in rows.items()}

    def calibration_inputs(self):
        """One input per calibration text, batch 1, packed at the full length (int8
        calibration)."""
        if self.tokenizer is None:
            raise ExportError("int8 calibration needs the model's tokenizer to turn "
                              "--calibration_data into ids, and this model has none")
        return [self.packed([text], None, self.max_seq_length) for text in self.sets.calibration]

    # --- packing ---

    def packed(self, texts, pair_texts, length):
        """Model inputs for `texts` (and `pair_texts`) at sequence length `length`."""
        if self.tokenizer is not None:
            packed = self.tokenizer(texts, pair_texts, max_length=length, truncation="longest_first")
            inputs = {name: np.asarray(packed[name], np.int32) for name in packed}
        else:
            inputs = self._synthetic(len(texts), pair_texts is not None, length)
        if self.choices:
            # Two choices per row: the row itself and the row with the next row's second half.
            inputs = {name: np.stack([value, np.roll(value, 1, axis=0)], axis=1)
                      for name, value in inputs.items()}
        if "masked_lm_positions" in self.input_names:
            inputs["masked_lm_positions"] = self._masked_positions(inputs["padding_mask"])
        return inputs

    def pad_to(self, inputs, length):
        """`inputs` right-padded to `length` (masked positions unchanged)."""
        padded = {}
        for name, value in inputs.items():
            if name == "masked_lm_positions":
                padded[name] = value
                continue
            fill = self.config.pad_token_id if name == "token_ids" else 0
            widths = [(0, 0)] * (value.ndim - 1) + [(0, length - value.shape[-1])]
            padded[name] = np.pad(value, widths, constant_values=fill)
        return padded

    def _synthetic(self, batch, pair, length):
        config = self.config
        low = min(config.pad_token_id + 1, config.vocab_size - 1)
        lengths = np.linspace(length, max(4, length // 2), batch).astype(int)
        token_ids = self.rng.integers(low, config.vocab_size, size=(batch, length))
        mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
        token_ids = np.where(mask == 1, token_ids, config.pad_token_id).astype(np.int32)
        segment_ids = np.zeros_like(token_ids)
        if pair and config.type_vocab_size > 1:
            for row, row_length in enumerate(lengths):
                segment_ids[row, row_length // 2:row_length] = 1
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": mask}

    def _masked_positions(self, padding_mask):
        mask = padding_mask.reshape(-1, padding_mask.shape[-1])
        positions = []
        for row in mask:
            real = max(int(row.sum()), 3)
            picks = self.rng.choice(np.arange(1, real - 1), size=MASKED_POSITIONS,
                                    replace=real - 2 < MASKED_POSITIONS)
            positions.append(np.sort(picks))
        return np.asarray(positions, np.int32).reshape(padding_mask.shape[:-1] + (MASKED_POSITIONS,))


def _interleaved(first, second):
    """The rows of `first` and `second` taken in turn (`first` may have one row more)."""
    rows = np.empty((len(first) + len(second),) + first.shape[1:], first.dtype)
    rows[0::2], rows[1::2] = first, second
    return rows
