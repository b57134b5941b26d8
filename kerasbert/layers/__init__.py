"""Keras layers shared by the BERT family: embeddings, attention, transformer block, pooler, heads."""

from kerasbert.layers.activations import gelu_exact, gelu_tanh, get_activation
from kerasbert.layers.choices import FoldChoices, UnfoldChoiceLogits
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.attention import MultiHeadSelfAttention, padding_mask_to_attention_bias
from kerasbert.layers.embeddings import Embeddings
from kerasbert.layers.heads import MaskedLMHead, ReplacedTokenHead
from kerasbert.layers.pooler import Pooler
from kerasbert.layers.replaced_tokens import ReplacedTokenSampler
from kerasbert.layers.sentence_pooling import SentencePooling
from kerasbert.layers.transformer import TransformerLayer

__all__ = [
    "Dropout",
    "Embeddings",
    "FoldChoices",
    "MaskedLMHead",
    "MultiHeadSelfAttention",
    "Pooler",
    "ReplacedTokenHead",
    "SentencePooling",
    "ReplacedTokenSampler",
    "TransformerLayer",
    "UnfoldChoiceLogits",
    "gelu_exact",
    "gelu_tanh",
    "get_activation",
    "padding_mask_to_attention_bias",
]
