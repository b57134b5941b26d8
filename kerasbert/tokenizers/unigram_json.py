"""A SentencePiece model rebuilt from the Unigram `tokenizer.json` that transformers writes.

transformers 5 saves an ALBERT tokenizer as a `tokenizer.json` only: the
SentencePiece pieces and scores are its Unigram model, the SentencePiece
normalization table its `Precompiled` normalizer. Those are all a Unigram
SentencePiece model needs, so the `spiece.model` can be put back together.
"""

import base64

from sentencepiece import sentencepiece_model_pb2 as model_pb2

from kerasbert.tokenizers.base import VocabularyError

_PIECE = model_pb2.ModelProto.SentencePiece


def model_proto_from_unigram_json(spec, source="tokenizer.json"):
    """The serialized SentencePiece `ModelProto` equal to a Unigram `tokenizer.json`.

    `spec` is the parsed JSON. Pieces keep their ids and the scores the file
    gives (with the lowered digit-comma scores of transformers 4's ALBERT
    converter where it applied them); the unknown piece is the model's `unk_id`; special added tokens become control
    pieces and other added tokens user-defined ones, as in ALBERT's own
    `spiece.model`. Raises `VocabularyError`, naming `source` and the field,
    for anything that is not such a file.

    >>> spec = {"model": {"type": "Unigram", "unk_id": 1,
    ...                   "vocab": [["<pad>", 0.0], ["<unk>", 0.0], ["▁a", -1.0]]},
    ...         "added_tokens": [{"id": 0, "content": "<pad>", "special": True}],
    ...         "normalizer": None, "pre_tokenizer": {"type": "Metaspace"}}
    >>> model = model_pb2.ModelProto.FromString(model_proto_from_unigram_json(spec))
    >>> [(piece.piece, _PIECE.Type.Name(piece.type)) for piece in model.pieces]
    [('<pad>', 'CONTROL'), ('<unk>', 'UNKNOWN'), ('▁a', 'NORMAL')]
    """
    model = spec.get("model") or {}
    if model.get("type") != "Unigram":
        raise VocabularyError(f"{source}: model.type is {model.get('type')!r}, not 'Unigram'")
    vocab = model.get("vocab")
    if not isinstance(vocab, list) or not vocab:
        raise VocabularyError(f"{source}: model.vocab must be a non-empty list of [piece, score]")
    unk_id = model.get("unk_id")
    if not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
        raise VocabularyError(f"{source}: model.unk_id {unk_id!r} is not the id of a piece "
                              f"(0..{len(vocab) - 1})")
    if model.get("byte_fallback"):
        raise VocabularyError(f"{source}: byte_fallback Unigram models are not supported")
    added = {token.get("id"): token for token in spec.get("added_tokens") or []}
    proto = model_pb2.ModelProto()
    for index, entry in enumerate(vocab):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], (int, float))):
            raise VocabularyError(f"{source}: model.vocab[{index}] is {entry!r}, "
                                  "not [piece, score]")
        piece = proto.pieces.add(piece=entry[0], score=entry[1], type=_PIECE.NORMAL)
        if index == unk_id:
            piece.type = _PIECE.UNKNOWN
        elif index in added:
            piece.type = _PIECE.CONTROL if added[index].get("special") else _PIECE.USER_DEFINED
    proto.trainer_spec.model_type = model_pb2.TrainerSpec.UNIGRAM
    proto.trainer_spec.vocab_size = len(vocab)
    proto.trainer_spec.unk_id = unk_id
    proto.trainer_spec.unk_piece = vocab[unk_id][0]
    proto.trainer_spec.bos_id = proto.trainer_spec.eos_id = proto.trainer_spec.pad_id = -1
    normalizer = proto.normalizer_spec
    charsmap = _precompiled_charsmap(spec.get("normalizer"))
    normalizer.name = "nmt_nfkc" if charsmap else "identity"
    normalizer.precompiled_charsmap = charsmap
    normalizer.add_dummy_prefix = _prepends_word_boundary(spec.get("pre_tokenizer"))
    normalizer.remove_extra_whitespaces = True
    normalizer.escape_whitespaces = True
    return proto.SerializeToString()


def _precompiled_charsmap(normalizer):
    """The `Precompiled` normalizer's table (bytes), alone or in a `Sequence`; b"" if none."""
    if not normalizer:
        return b""
    if normalizer.get("type") == "Sequence":
        for part in normalizer.get("normalizers") or []:
            charsmap = _precompiled_charsmap(part)
            if charsmap:
                return charsmap
        return b""
    if normalizer.get("type") == "Precompiled" and normalizer.get("precompiled_charsmap"):
        return base64.b64decode(normalizer["precompiled_charsmap"])
    return b""


def _prepends_word_boundary(pre_tokenizer):
    """Whether the `Metaspace` pre-tokenizer puts "▁" before the text (add_dummy_prefix)."""
    if not pre_tokenizer:
        return True
    if pre_tokenizer.get("type") == "Sequence":
        parts = pre_tokenizer.get("pretokenizers") or []
        return all(_prepends_word_boundary(part) for part in parts)
    if pre_tokenizer.get("type") == "Metaspace":
        return pre_tokenizer.get("prepend_scheme", "always") != "never" and pre_tokenizer.get(
            "add_prefix_space", True)
    return True
