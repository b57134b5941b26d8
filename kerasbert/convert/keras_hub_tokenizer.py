"""The tokenizer of a keras-hub preset (`tokenizer.json` + `assets/tokenizer/`) as a kerasbert one.

The kerasbert tokenizer gets the keras-hub tokenizer's vocabulary and the
settings that change its ids, so both give the same ids for ordinary text:

- `BertTokenizer`, `ElectraTokenizer`, `DistilBertTokenizer` (WordPiece
  `vocabulary.txt`): `WordPieceTokenizer` with keras-hub's `lowercase`,
  `strip_accents`, `split_on_cjk` and `oov_token`; DistilBERT's packs a
  pair's second text with segment id 0, as it has no token types (keras-hub's
  DistilBERT preprocessor gives no `segment_ids` at all).
- `RobertaTokenizer` (byte-level BPE `vocabulary.json` + `merges.txt`):
  `BytePairTokenizer` with keras-hub's `add_prefix_space`.
- `AlbertTokenizer` (SentencePiece `vocabulary.spm`): `SentencePieceTokenizer`
  with ALBERT's lower-casing, accent stripping and whitespace collapsing off,
  because keras-hub hands the raw text to the SentencePiece model (whose own
  normalizer still runs on both sides).

Where the two still differ: kerasbert's BPE tokenizer turns `<unk>` written
in the text into its id, as Hugging Face's does, where keras-hub tokenizes it
as text (it keeps only `<s>`, `</s>`, `<pad>` and `<mask>` whole), and
kerasbert's SentencePiece preprocessing turns `` and '' into `"` as ALBERT's
does.
Settings kerasbert cannot reproduce (`special_tokens_in_strings=True`, a
suffix other than `##`, `split=False`, SentencePiece `add_bos`/`add_eos`)
raise `KerasHubPresetError`.
"""

import json

from kerasbert import file_system
from kerasbert.convert.keras_hub_config import KerasHubPresetError
from kerasbert.convert.keras_hub_names import KERAS_HUB_FAMILIES, keras_hub_tables
from kerasbert.families.conversion_tables import BYTE_PAIR, SENTENCE_PIECE, WORDPIECE
from kerasbert.tokenizers import BytePairTokenizer, SentencePieceTokenizer, WordPieceTokenizer
from kerasbert.tokenizers.from_hf import read_vocab_txt

TOKENIZER_CONFIG_FILE = "tokenizer.json"
ASSETS_DIRECTORY = ("assets", "tokenizer")


def tokenizer_from_keras_hub(directory):
    """The kerasbert tokenizer equal to the keras-hub tokenizer saved in preset `directory`."""
    path = file_system.join(directory, TOKENIZER_CONFIG_FILE)
    if not file_system.isfile(path):
        raise KerasHubPresetError(
            f"keras-hub preset {directory!r} has no tokenizer ({TOKENIZER_CONFIG_FILE} is missing; "
            "save one with tokenizer.save_to_preset(directory))")
    try:
        with file_system.open_file(path, encoding="utf-8") as file:
            saved = json.load(file)
        class_name, config = saved["class_name"], saved["config"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as error:
        raise KerasHubPresetError(
            f"{path}: not a serialized keras-hub tokenizer ({error!r})") from None
    tables_of_class = {keras_hub_tables(name).tokenizer_class: keras_hub_tables(name)
                       for name in KERAS_HUB_FAMILIES}
    if class_name not in tables_of_class:
        raise KerasHubPresetError(
            f"{path}: keras-hub tokenizer class {class_name!r} is not supported; supported: "
            f"{sorted(tables_of_class)}")
    tables = tables_of_class[class_name]
    assets = file_system.join(directory, *ASSETS_DIRECTORY)
    return _BUILDERS[tables.tokenizer_format](assets, config, path, tables)


def _asset(assets, name):
    path = file_system.join(assets, name)
    if not file_system.isfile(path):
        raise KerasHubPresetError(f"keras-hub tokenizer asset {path} is missing")
    return path


def _require(config, setting, expected, path):
    value = config.get(setting, expected)
    if value != expected:
        raise KerasHubPresetError(
            f"{path}: {setting}={value!r} has no kerasbert counterpart (kerasbert's tokenizer "
            f"behaves as {setting}={expected!r})")


def _wordpiece(assets, config, path, tables):
    _require(config, "special_tokens_in_strings", False, path)
    _require(config, "suffix_indicator", "##", path)
    _require(config, "split", True, path)
    vocabulary_path = _asset(assets, "vocabulary.txt")
    return WordPieceTokenizer(
        read_vocab_txt(vocabulary_path), lowercase=config.get("lowercase", False),
        strip_accents=config.get("strip_accents", False),
        split_cjk=config.get("split_on_cjk", True), unk_token=config.get("oov_token", "[UNK]"),
        # A family without token types packs a pair's second text with segment id 0.
        second_segment_id=int(tables.tokenizer_has_segments), source=vocabulary_path)


def _byte_pair(assets, config, path, tables):
    with file_system.local_copy(_asset(assets, "vocabulary.json")) as vocabulary, \
            file_system.local_copy(_asset(assets, "merges.txt")) as merges:
        return BytePairTokenizer.from_files(
            vocabulary, merges, add_prefix_space=config.get("add_prefix_space", False))


def _sentence_piece(assets, config, path, tables):
    _require(config, "add_bos", False, path)
    _require(config, "add_eos", False, path)
    model_path = _asset(assets, "vocabulary.spm")
    proto = file_system.read_bytes(model_path)
    return SentencePieceTokenizer(proto, lowercase=False, keep_accents=True, remove_space=False,
                                  source=model_path)


# Asset format -> `builder(assets, tokenizer config, path, the family's KerasHubTables)`.
_BUILDERS = {WORDPIECE: _wordpiece, BYTE_PAIR: _byte_pair, SENTENCE_PIECE: _sentence_piece}
