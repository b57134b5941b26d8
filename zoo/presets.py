"""The architectures of the public BERT, RoBERTa, ALBERT, ELECTRA and DistilBERT checkpoints.

Each preset lists the `EncoderConfig` fields of one public checkpoint's
`config.json`, under the name kerasbert uses for it, with the checkpoint's
public name in `source`.
"""

_BERT = dict(family="bert", hidden_activation="gelu", max_positions=512, type_vocab_size=2,
             pad_token_id=0, layer_norm_epsilon=1e-12, dropout=0.1, attention_dropout=0.1)
_ROBERTA = dict(family="roberta", vocab_size=50265, hidden_activation="gelu", max_positions=514,
                type_vocab_size=1, pad_token_id=1, position_offset=2, layer_norm_epsilon=1e-5,
                dropout=0.1, attention_dropout=0.1)
_ALBERT = dict(family="albert", vocab_size=30000, embedding_size=128, hidden_activation="gelu_new",
               max_positions=512, type_vocab_size=2, pad_token_id=0, layer_norm_epsilon=1e-12,
               dropout=0.0, attention_dropout=0.0, num_hidden_groups=1, inner_group_num=1)
_ELECTRA = dict(family="electra", vocab_size=30522, hidden_activation="gelu", max_positions=512,
                type_vocab_size=2, pad_token_id=0, layer_norm_epsilon=1e-12, dropout=0.1,
                attention_dropout=0.1)

# DistilBERT: no segment embeddings, no pooler, learned positions in the public checkpoints.
_DISTILBERT = dict(family="distilbert", hidden_activation="gelu", max_positions=512,
                   pad_token_id=0, layer_norm_epsilon=1e-12, dropout=0.1, attention_dropout=0.1,
                   sinusoidal_positions=False)


def _shape(layers, hidden, heads, intermediate, **extra):
    return dict(num_layers=layers, hidden_size=hidden, num_heads=heads,
                intermediate_size=intermediate, **extra)


# name -> (public checkpoint, EncoderConfig fields)
PRESETS = {
    "bert_tiny_uncased": ("google/bert_uncased_L-2_H-128_A-2",
                          dict(_BERT, vocab_size=30522, **_shape(2, 128, 2, 512))),
    "bert_mini_uncased": ("google/bert_uncased_L-4_H-256_A-4",
                          dict(_BERT, vocab_size=30522, **_shape(4, 256, 4, 1024))),
    "bert_small_uncased": ("google/bert_uncased_L-4_H-512_A-8",
                           dict(_BERT, vocab_size=30522, **_shape(4, 512, 8, 2048))),
    "bert_medium_uncased": ("google/bert_uncased_L-8_H-512_A-8",
                            dict(_BERT, vocab_size=30522, **_shape(8, 512, 8, 2048))),
    "bert_base_uncased": ("google-bert/bert-base-uncased",
                          dict(_BERT, vocab_size=30522, **_shape(12, 768, 12, 3072))),
    "bert_base_cased": ("google-bert/bert-base-cased",
                        dict(_BERT, vocab_size=28996, **_shape(12, 768, 12, 3072))),
    "bert_large_uncased": ("google-bert/bert-large-uncased",
                           dict(_BERT, vocab_size=30522, **_shape(24, 1024, 16, 4096))),
    "bert_large_cased": ("google-bert/bert-large-cased",
                         dict(_BERT, vocab_size=28996, **_shape(24, 1024, 16, 4096))),
    "bert_base_multilingual_cased": ("google-bert/bert-base-multilingual-cased",
                                     dict(_BERT, vocab_size=119547, **_shape(12, 768, 12, 3072))),
    "roberta_base": ("FacebookAI/roberta-base", dict(_ROBERTA, **_shape(12, 768, 12, 3072))),
    "roberta_large": ("FacebookAI/roberta-large", dict(_ROBERTA, **_shape(24, 1024, 16, 4096))),
    "albert_base_v2": ("albert/albert-base-v2", dict(_ALBERT, **_shape(12, 768, 12, 3072))),
    "albert_large_v2": ("albert/albert-large-v2", dict(_ALBERT, **_shape(24, 1024, 16, 4096))),
    "albert_xlarge_v2": ("albert/albert-xlarge-v2", dict(_ALBERT, **_shape(24, 2048, 16, 8192))),
    "albert_xxlarge_v2": ("albert/albert-xxlarge-v2", dict(_ALBERT, **_shape(12, 4096, 64, 16384))),
    "electra_small_discriminator": ("google/electra-small-discriminator",
                                    dict(_ELECTRA, embedding_size=128, **_shape(12, 256, 4, 1024))),
    "electra_small_generator": ("google/electra-small-generator",
                                dict(_ELECTRA, embedding_size=128, **_shape(12, 256, 4, 1024))),
    "electra_base_discriminator": ("google/electra-base-discriminator",
                                   dict(_ELECTRA, embedding_size=768, **_shape(12, 768, 12, 3072))),
    "electra_base_generator": ("google/electra-base-generator",
                               dict(_ELECTRA, embedding_size=768, **_shape(12, 256, 4, 1024))),
    "electra_large_discriminator": ("google/electra-large-discriminator",
                                    dict(_ELECTRA, embedding_size=1024, **_shape(24, 1024, 16, 4096))),
    "electra_large_generator": ("google/electra-large-generator",
                                dict(_ELECTRA, embedding_size=1024, **_shape(24, 256, 4, 1024))),
    "distilbert_base_uncased": ("distilbert/distilbert-base-uncased",
                                dict(_DISTILBERT, vocab_size=30522, **_shape(6, 768, 12, 3072))),
    "distilbert_base_cased": ("distilbert/distilbert-base-cased",
                              dict(_DISTILBERT, vocab_size=28996, **_shape(6, 768, 12, 3072))),
    "distilbert_base_multilingual_cased": ("distilbert/distilbert-base-multilingual-cased",
                                           dict(_DISTILBERT, vocab_size=119547,
                                                **_shape(6, 768, 12, 3072))),
}
