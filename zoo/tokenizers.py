"""Which tokenizer each preset uses, with which settings and special tokens."""

import copy
import dataclasses

from kerasbert import families, file_system
from kerasbert.tokenizers import BytePairTokenizer, WordPieceTokenizer, load_sentence_piece_tokenizer
from kerasbert.tokenizers.from_hf import read_vocab_txt


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """The tokenizer of a preset: its kind, constructor settings and special tokens.

    Example:
    >>> spec = tokenizer_spec("bert_base_cased")
    >>> spec.kind, spec.options, spec.special_tokens["cls"]
    ('wordpiece', {'lowercase': False, 'second_segment_id': 1}, '[CLS]')
    >>> tokenizer_spec("electra_base_discriminator").options["lowercase"]
    True
    """

    kind: str
    options: dict
    special_tokens: dict

    def files(self):
        """The vocabulary files this kind of tokenizer reads."""
        return {"wordpiece": ("vocab.txt",), "byte_pair": ("vocab.json", "merges.txt"),
                "sentence_piece": ("spiece.model",)}[self.kind]


def tokenizer_spec(preset):
    """The `TokenizerSpec` of preset `preset` (as its public checkpoint's tokenizer is set up:
    its family's `TokenizerTraits`)."""
    from kerasbert.zoo.registry import get_config

    traits = families.get(get_config(preset).family).tokenizer
    options = copy.deepcopy(dict(traits.options))
    if traits.lowercase_when_uncased:
        options = {"lowercase": "uncased" in preset, **options}
    return TokenizerSpec(traits.kind, options, dict(traits.special_tokens))


def build_tokenizer(preset, vocabulary_dir):
    """The tokenizer of `preset` over the vocabulary files in `vocabulary_dir`.

    Example (with the vocabulary trained on the shipped corpus):
    >>> from kerasbert.data import demo
    >>> tokenizer = build_tokenizer("roberta_base", demo.vocabulary_dir("byte_pair"))
    >>> type(tokenizer).__name__, tokenizer.cls_token_id, tokenizer.pad_token_id
    ('BytePairTokenizer', 0, 1)
    """
    spec = tokenizer_spec(preset)
    missing = [name for name in spec.files()
               if not file_system.isfile(file_system.join(vocabulary_dir, name))]
    if missing:
        raise FileNotFoundError(f"{preset} needs {list(spec.files())} in {vocabulary_dir!r}; "
                                f"missing {missing}")
    kwargs = {**spec.options, **{f"{name}_token": token for name, token in spec.special_tokens.items()}}
    paths = [file_system.join(vocabulary_dir, name) for name in spec.files()]
    if spec.kind == "wordpiece":
        return WordPieceTokenizer(read_vocab_txt(paths[0]), source=paths[0], **kwargs)
    if spec.kind == "byte_pair":
        return BytePairTokenizer.from_files(*paths, **kwargs)
    return load_sentence_piece_tokenizer(paths[0], **kwargs)
