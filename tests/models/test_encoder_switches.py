"""The encoder's general switches that ModernBERT needs (rotary positions with a base per layer
type, sliding-window local layers computed in blocks, pre-LayerNorm blocks with a final
LayerNorm, GeGLU feed-forward, bias-free layers), switched on in a generic config and checked
against `transformers`' `ModernBertModel`, which has them all: equal outputs at lengths below and
well above the window, with padding, in its eager and SDPA attention."""

import numpy as np
import pytest
import torch
import transformers

import keras

from kerasbert import EncoderConfig
from kerasbert.layers import MultiHeadSelfAttention
from kerasbert.layers.chunked_attention import QUERY_CHUNK
from kerasbert.layers.local_attention import local_attention
from kerasbert.models import build_encoder

VOCAB, HIDDEN, HEADS, INTERMEDIATE, WINDOW = 120, 32, 2, 48, 16
# Above QUERY_CHUNK (1,024): the global layers' inference runs in chunks of query rows.
MAX_POSITIONS = 2048


def _config(num_layers):
    # family "bert" with every switch on: the switches are the encoder's, not a family's. The
    # segment table is there (BERT's) and holds zeros below; ModernBERT has none.
    return EncoderConfig(
        family="bert", vocab_size=VOCAB, hidden_size=HIDDEN, num_layers=num_layers,
        num_heads=HEADS, intermediate_size=INTERMEDIATE, max_positions=MAX_POSITIONS,
        layer_norm_epsilon=1e-5, dropout=0.0, attention_dropout=0.0, type_vocab_size=1,
        use_pooler=False, rotary_theta=160000.0, local_rotary_theta=10000.0,
        local_attention_window=WINDOW, global_attention_every=3, gated_mlp=True, pre_norm=True,
        use_bias=False)


def _reference(num_layers):
    torch.manual_seed(0)
    config = transformers.ModernBertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
        num_hidden_layers=num_layers, num_attention_heads=HEADS,
        max_position_embeddings=MAX_POSITIONS,
        local_attention=WINDOW, global_attn_every_n_layers=3, pad_token_id=0, bos_token_id=None,
        eos_token_id=None, cls_token_id=None, sep_token_id=None)
    model = transformers.ModernBertModel(config).eval()
    with torch.no_grad():  # LayerNorm weights away from 1, projections away from their init
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return model


def _copy_weights(reference, encoder):
    """`ModernBertModel`'s weights into the generic encoder (its fused `Wqkv` split in three)."""
    state = {name: value.numpy() for name, value in reference.state_dict().items()}
    variables = {variable.path: variable for variable in encoder.weights}
    values = {"embeddings/token_embedding/embeddings": state["embeddings.tok_embeddings.weight"],
              "embeddings/segment_embedding/embeddings": np.zeros((1, HIDDEN), "float32"),
              "embeddings/layer_norm/gamma": state["embeddings.norm.weight"],
              "final_layer_norm/gamma": state["final_norm.weight"]}
    for n in range(encoder.config.num_layers):
        ours, theirs = f"transformer_layer_{n}", f"layers.{n}"
        query, key, value = np.split(state[f"{theirs}.attn.Wqkv.weight"], 3, axis=0)
        values.update({
            f"{ours}/attention/query/kernel": query.T, f"{ours}/attention/key/kernel": key.T,
            f"{ours}/attention/value/kernel": value.T,
            f"{ours}/attention/output/kernel": state[f"{theirs}.attn.Wo.weight"].T,
            f"{ours}/output_layer_norm/gamma": state[f"{theirs}.mlp_norm.weight"],
            f"{ours}/intermediate/kernel": state[f"{theirs}.mlp.Wi.weight"].T,
            f"{ours}/output/kernel": state[f"{theirs}.mlp.Wo.weight"].T})
        if n:  # the first layer's attention reads the embedding LayerNorm's output as it is
            values[f"{ours}/attention_layer_norm/gamma"] = state[f"{theirs}.attn_norm.weight"]
    assert sorted(values) == sorted(variables)
    for path, value in values.items():
        variables[path].assign(value)


@pytest.fixture(scope="module")
def pair():
    reference = _reference(num_layers=4)  # layers 0 and 3 global, 1 and 2 local
    encoder = build_encoder(_config(num_layers=4))
    _copy_weights(reference, encoder)
    return reference, encoder


def _batch(length, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, size=(2, length)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, length * 2 // 3:] = 0
    ids[mask == 0] = 0
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
# Below, above and far above the window of 16; 1,100 tokens are two chunks of query rows.
@pytest.mark.parametrize("length", [7, 40, 300, 1100])
def test_the_switches_give_modernbert_outputs(pair, length, implementation):
    reference, encoder = pair
    assert encoder.transformer_layers[0].attention.query_chunk_size == QUERY_CHUNK
    inputs = _batch(length)
    ours = np.asarray(encoder(inputs)["sequence_output"])
    reference.config._attn_implementation = implementation
    with torch.no_grad():
        theirs = reference(input_ids=torch.tensor(inputs["token_ids"]).long(),
                           attention_mask=torch.tensor(inputs["padding_mask"])
                           ).last_hidden_state.numpy()
    tokens = inputs["padding_mask"] == 1
    np.testing.assert_allclose(ours[tokens], theirs[tokens], atol=1e-5)


@pytest.mark.parametrize("rotary_theta", [None, 10000.0])
def test_attention_in_chunks_of_query_rows_equals_attention_over_the_whole_matrix(rotary_theta):
    """37 tokens (the last 12 padding) in chunks of 8 rows, the last chunk part padding: equal
    to the whole-matrix path, also for rows at some positions; training keeps the whole path."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 37, HIDDEN)).astype("float32")
    mask = np.ones((2, 37), "int32")
    mask[1, 25:] = 0
    layers = [MultiHeadSelfAttention(HEADS, HIDDEN, rotary_theta=rotary_theta,
                                     query_chunk_size=size) for size in (None, 8)]
    layers[0](x, mask)
    layers[1](x, mask)
    layers[1].set_weights(layers[0].get_weights())
    whole, chunked = (np.asarray(layer(x, mask)) for layer in layers)
    np.testing.assert_allclose(chunked, whole, rtol=0, atol=2e-6)
    rows, positions = x[:, [3, 36, 20]], np.array([3, 36, 20], "int32")
    np.testing.assert_allclose(
        np.asarray(layers[1](x, mask, queries=rows, query_positions=positions)),
        whole[:, [3, 36, 20]], rtol=0, atol=2e-6)
    np.testing.assert_allclose(np.asarray(layers[1](x, mask, training=True)), whole, rtol=0,
                               atol=2e-6)
    assert MultiHeadSelfAttention.from_config(layers[1].get_config()).query_chunk_size == 8
    assert tuple(layers[1](x[:, :0], mask[:, :0]).shape) == (2, 0, HIDDEN)


def test_rows_at_positions_equal_the_full_output_with_a_local_last_layer():
    encoder = build_encoder(_config(num_layers=3))  # layer 2, the last, is local and rotary
    assert encoder.transformer_layers[-1].local_window == WINDOW
    inputs = _batch(60, seed=1)
    positions = np.array([[5, 59, 30], [17, 2, 39]], "int32")
    full = np.asarray(encoder(inputs)["sequence_output"])
    at = np.asarray(encoder.outputs_at_positions(inputs, positions)["sequence_output"])
    expected = np.stack([full[row, positions[row]] for row in range(2)])
    np.testing.assert_allclose(at, expected, atol=1e-5)


@pytest.mark.parametrize("length,half_window", [(1, 4), (9, 4), (33, 8), (50, 3)])
def test_blocked_local_attention_equals_masked_full_attention(length, half_window):
    rng = np.random.default_rng(length)
    query, key, value = (rng.normal(size=(2, 3, length, 8)).astype("float32") for _ in range(3))
    mask = np.ones((2, length), "int32")
    mask[1, length // 2 + 1:] = 0
    distance = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
    allowed = (distance <= half_window)[None, None] & (mask[:, None, None, :] == 1)
    scores = np.where(allowed, query @ key.transpose(0, 1, 3, 2), -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = (weights / weights.sum(-1, keepdims=True)) @ value
    ours = np.asarray(local_attention(query, key, value, mask, half_window))
    tokens = mask == 1  # padding queries' rows are never read
    np.testing.assert_allclose(ours.transpose(0, 2, 1, 3)[tokens],
                               expected.transpose(0, 2, 1, 3)[tokens], atol=1e-5)


def test_an_encoder_with_the_switches_saves_and_reloads(tmp_path):
    encoder = build_encoder(_config(num_layers=2))
    inputs = _batch(40)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    reloaded = keras.models.load_model(path)
    assert reloaded.config == encoder.config
    layer = reloaded.transformer_layers[1]
    assert (layer.pre_norm, layer.gated_mlp, layer.use_bias, layer.rotary_theta,
            layer.local_window) == (True, True, False, 10000.0, WINDOW)
    np.testing.assert_allclose(np.asarray(reloaded(inputs)["sequence_output"]),
                               np.asarray(encoder(inputs)["sequence_output"]), atol=1e-6)


@pytest.mark.parametrize("changes,named", [
    (dict(rotary_theta=-1.0), "rotary_theta"),
    (dict(local_rotary_theta=10000.0), "local_rotary_theta"),
    (dict(rotary_theta=10000.0, num_heads=32, hidden_size=96), "even head size"),
    (dict(local_attention_window=1), "local_attention_window"),
    (dict(global_attention_every=0), "global_attention_every"),
    (dict(pre_norm="yes"), "pre_norm"),
])
def test_bad_switch_values_are_refused_by_name(changes, named):
    base = dict(family="bert", vocab_size=VOCAB, hidden_size=HIDDEN, num_layers=2,
                num_heads=HEADS, intermediate_size=INTERMEDIATE)
    with pytest.raises(ValueError, match=named):
        EncoderConfig(**{**base, **changes})


def test_a_fused_projection_equals_three_separate_ones():
    from kerasbert.layers.attention import MultiHeadSelfAttention
    separate = MultiHeadSelfAttention(HEADS, HIDDEN, use_bias=False, rotary_theta=10000.0,
                                      local_window=WINDOW)
    fused = MultiHeadSelfAttention(HEADS, HIDDEN, use_bias=False, fused_projection=True,
                                   rotary_theta=10000.0, local_window=WINDOW)
    x = np.random.default_rng(3).normal(size=(2, 40, HIDDEN)).astype("float32")
    mask = np.ones((2, 40), "int32")
    separate(x, mask), fused(x, mask)
    fused.qkv.kernel.assign(np.concatenate(
        [np.asarray(layer.kernel) for layer in (separate.query, separate.key, separate.value)],
        axis=1))
    fused.output_dense.kernel.assign(np.asarray(separate.output_dense.kernel))
    np.testing.assert_allclose(np.asarray(fused(x, mask)), np.asarray(separate(x, mask)),
                               atol=1e-6)


def test_outputs_do_not_depend_on_how_far_the_padding_reaches():
    """Every position, padding included, gives the same output however long the batch is
    padded (an exported model cuts batches to length buckets and is compared there): a padding
    position with no token in its window attends to nothing."""
    encoder = build_encoder(_config(num_layers=3))
    inputs = _batch(40, seed=2)  # row 1: 26 tokens, then padding past the window of 16
    longer = {name: np.pad(value, ((0, 0), (0, 37))) for name, value in inputs.items()}
    np.testing.assert_allclose(np.asarray(encoder(longer)["sequence_output"])[:, :40],
                               np.asarray(encoder(inputs)["sequence_output"]), atol=1e-5)
