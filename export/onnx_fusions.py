"""Rewrite tf2onnx's graph of a post-LayerNorm BERT-family encoder into the fused operators ONNX
Runtime runs fastest: `com.microsoft` `Attention` (one packed query/key/value product and the
whole scaled-dot-product attention in one kernel) or `MultiHeadAttention` (when only some rows
attend, as in `Encoder.outputs_at_positions`), ONNX `LayerNormalization`, and every Keras
`Dense` as one `MatMul` plus its bias `Add`. ONNX Runtime's transformer optimizer then fuses
what it recognises on top (`SkipLayerNormalization`, `BiasGelu`).

tf2onnx writes Keras' LayerNormalization as `GlobalAveragePool` moments with a reciprocal
square root, each `Dense` as a Tensordot (`Reshape` to 2-D, `MatMul`, `Reshape` back) and the
attention as reshapes, transposes, two batched products and a softmax over scores plus an
additive padding bias: none of these are the patterns ONNX Runtime's optimizer matches, so it
fused nothing (docs/export.md). `fuse_encoder_graph` matches each of them exactly (operators,
constants, transposes; anything else is left as it is), replaces it with the fused node that
computes the same tensor, and drops what nothing reads any more. Attention with rotary
positions, local windows or chunked queries does not have this pattern and stays unfused.
"""

import collections

import numpy as np
import onnx
from onnx import helper, numpy_helper

MICROSOFT_DOMAIN = "com.microsoft"


class _Graph:
    """Producers, consumers and constant values of an ONNX graph, with node replacement."""

    def __init__(self, graph):
        self.graph = graph
        self.constants = {tensor.name: numpy_helper.to_array(tensor)
                          for tensor in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute[0].name == "value":
                self.constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        self.producer = {output: node for node in graph.node for output in node.output}
        self.consumers = collections.defaultdict(list)
        for node in graph.node:
            for name in dict.fromkeys(_reads(node)):  # a node reading a tensor twice, once
                self.consumers[name].append(node)
        self.replaced = {}  # id(old node) -> new nodes put where it was
        self.new_initializers = []
        self.extra_nodes = []  # new nodes at no old node's place (sorted by `rebuild`)
        self.counter = 0

    def node(self, tensor, op_type):
        """The node of `op_type` producing `tensor`, else None."""
        node = self.producer.get(tensor)
        return node if node is not None and node.op_type == op_type else None

    def constant(self, tensor):
        return self.constants.get(tensor)

    def only_consumer(self, tensor):
        consumers = self.consumers.get(tensor, [])
        return consumers[0] if len(consumers) == 1 else None

    def other_input(self, node, tensor):
        """The input of binary `node` that is not `tensor`."""
        first, second = node.input
        return second if first == tensor else first if second == tensor else None

    def add_initializer(self, stem, array):
        self.counter += 1
        name = f"fused/{stem}_{self.counter}"
        self.new_initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        self.constants[name] = array
        return name

    def fresh(self, stem):
        self.counter += 1
        return f"fused/{stem}_{self.counter}"

    def replace(self, producing, new_nodes):
        """Put `new_nodes` in place of node `producing`, whose outputs they produce."""
        self.replaced[id(producing)] = new_nodes
        for node in new_nodes:
            for output in node.output:
                self.producer[output] = node

    def rebuild(self, keep_outputs):
        """The graph's nodes with replacements made, unread nodes dropped, and in
        topological order; unread initializers dropped."""
        nodes = list(self.extra_nodes)
        for node in self.graph.node:
            nodes.extend(self.replaced.get(id(node), [node]))
        producers = {output: node for node in nodes for output in node.output}
        needed, pending, live_ids = set(), list(keep_outputs), set()
        while pending:
            name = pending.pop()
            if name in needed:
                continue
            needed.add(name)
            node = producers.get(name)
            if node is not None and id(node) not in live_ids:
                live_ids.add(id(node))
                pending.extend(input_name for input_name in _reads(node) if input_name)
        live = [node for node in nodes if id(node) in live_ids]
        initializers = [tensor for tensor in list(self.graph.initializer) + self.new_initializers
                        if tensor.name in needed]
        del self.graph.node[:]
        self.graph.node.extend(_topological(live, {i.name for i in self.graph.input} |
                                            {t.name for t in initializers}))
        del self.graph.initializer[:]
        self.graph.initializer.extend(initializers)


def _reads(node):
    """The tensors `node` reads: its inputs, and the outer tensors its subgraphs (`If`, `Loop`
    bodies) use by name."""
    names = list(node.input)
    for attribute in node.attribute:
        for subgraph in list(attribute.graphs) + ([attribute.g] if attribute.HasField("g")
                                                  else []):
            inside = {value.name for value in subgraph.input} | {
                tensor.name for tensor in subgraph.initializer} | {
                output for inner in subgraph.node for output in inner.output}
            names.extend(name for inner in subgraph.node for name in _reads(inner)
                         if name not in inside)
    return names


def _topological(nodes, available):
    """`nodes` ordered so that each comes after the producers of its inputs."""
    available = set(available) | {""}
    waiting, ordered = list(nodes), []
    while waiting:
        ready = [node for node in waiting if all(name in available for name in _reads(node))]
        if not ready:
            raise ValueError("the fused ONNX graph has a cycle or an input nothing produces")
        ready_ids = {id(node) for node in ready}
        waiting = [node for node in waiting if id(node) not in ready_ids]
        for node in ready:
            ordered.append(node)
            available.update(node.output)
    return ordered


def _flattened_product(graph, matmul):
    """`(x, kernel name)` when `matmul` is `MatMul(Reshape(x, [-1, in]), kernel)` of a Keras
    Dense's Tensordot, else None."""
    if matmul is None or not matmul.name.endswith("/Tensordot/MatMul"):
        return None
    kernel = graph.constant(matmul.input[1])
    flatten = graph.node(matmul.input[0], "Reshape")
    # tf2onnx shares one flattening between the Dense layers reading the same tensor
    shape = flatten and graph.constant(flatten.input[1])
    if kernel is None or kernel.ndim != 2 or shape is None or (
            shape.tolist() != [-1, kernel.shape[0]]):
        return None
    return flatten.input[0], matmul.input[1]


def _tensordot(graph, back):
    """`(x, kernel name)` when Reshape node `back` ends tf2onnx's Tensordot of a Keras Dense:
    `Reshape(MatMul(Reshape(x, [-1, in]), kernel), leading dims of x + [out])`, else None."""
    if back.op_type != "Reshape" or not back.name.endswith("/Tensordot"):
        return None
    matmul = graph.node(back.input[0], "MatMul")
    return _flattened_product(graph, matmul) if matmul and (
        matmul.name == back.name + "/MatMul") else None


def _dense(graph, tensor):
    """`(x, kernel, bias or None)` (arrays) when `tensor` is a Keras Dense's output: a Tensordot
    (see `_tensordot`), plus a bias `Add` when the layer has a bias. Without a bias (or one
    tf2onnx folded away as zero) the `MatMul`'s flat output counts too, when the next reshape
    is the attention's split into heads, which tf2onnx merged with the Tensordot's."""
    bias = None
    add = graph.node(tensor, "Add")
    if add is not None:
        for index in (0, 1):
            value = graph.constant(add.input[1 - index])
            if value is not None and value.ndim == 1 and graph.node(add.input[index], "Reshape"):
                bias, tensor = value, add.input[index]
                break
        else:
            return None
    back = graph.node(tensor, "Reshape")
    found = _tensordot(graph, back) if back else None
    if found is None and bias is None:
        found = _flattened_product(graph, graph.node(tensor, "MatMul"))
    if not found:
        return None
    return found[0], graph.constant(found[1]), bias


def fuse_dense_layers(graph):
    """Every Keras Dense's Tensordot as one `MatMul(x, kernel)` (ONNX's MatMul broadcasts over
    the leading axes); the count. Its bias `Add` follows as before."""
    count = 0
    for node in list(graph.graph.node):
        found = _tensordot(graph, node) if node.op_type == "Reshape" else None
        if found is None:
            continue
        graph.replace(node, [helper.make_node("MatMul", list(found), list(node.output),
                                              name=node.name + "/fused")])
        count += 1
    return count


def _layer_norm(graph, mean_node):
    """`(x, gamma, beta, epsilon, output, last node)` for tf2onnx's LayerNormalization pattern
    starting at `GlobalAveragePool` `mean_node`, else None."""
    x, mean = mean_node.input[0], mean_node.output[0]
    consumers = graph.consumers[mean]
    sub = next((n for n in consumers if n.op_type == "Sub" and list(n.input) == [x, mean]), None)
    neg = next((n for n in consumers if n.op_type == "Neg"), None)
    if sub is None or neg is None or len(consumers) != 2:
        return None
    square = graph.only_consumer(sub.output[0])
    if square is None or square.op_type != "Mul" or list(square.input) != [sub.output[0]] * 2:
        return None
    variance = graph.only_consumer(square.output[0])
    add_epsilon = variance and graph.only_consumer(variance.output[0])
    if variance is None or variance.op_type != "GlobalAveragePool" or add_epsilon is None or (
            add_epsilon.op_type != "Add"):
        return None
    epsilon = graph.constant(graph.other_input(add_epsilon, variance.output[0]))
    sqrt = graph.only_consumer(add_epsilon.output[0])
    reciprocal = sqrt and graph.only_consumer(sqrt.output[0])
    if epsilon is None or epsilon.size != 1 or sqrt is None or sqrt.op_type != "Sqrt" or (
            reciprocal is None or reciprocal.op_type != "Reciprocal"):
        return None
    width = None
    scale, gamma = reciprocal.output[0], None
    scale_mul = graph.only_consumer(scale)
    if scale_mul is not None and scale_mul.op_type == "Mul":
        gamma = graph.constant(graph.other_input(scale_mul, scale))
        if gamma is None:
            return None
        scale = scale_mul.output[0]
        width = gamma.size
    users = graph.consumers[scale]
    times_x = next((n for n in users if n.op_type == "Mul" and x in n.input), None)
    times_mean = next((n for n in users if n.op_type == "Mul" and neg.output[0] in n.input), None)
    if times_x is None or times_mean is None or len(users) != 2:
        return None
    shift, beta = times_mean.output[0], None
    beta_add = graph.only_consumer(shift)
    if beta_add is not None and beta_add.op_type == "Add":
        beta = graph.constant(graph.other_input(beta_add, shift))
        if beta is not None:
            shift = beta_add.output[0]
    final = graph.only_consumer(shift)
    if final is None or final.op_type != "Add" or sorted(final.input) != sorted(
            [times_x.output[0], shift]):
        return None
    width = width or (beta.size if beta is not None else None)
    if width is None or (beta is not None and beta.size != width):
        return None
    gamma = np.ones(width, np.float32) if gamma is None else gamma.reshape(width)
    beta = np.zeros(width, np.float32) if beta is None else beta.reshape(width)
    return x, gamma, beta, float(epsilon.reshape(())), final.output[0], final


def fuse_layer_norms(graph):
    """Every LayerNormalization pattern as one ONNX `LayerNormalization`; the count."""
    count = 0
    for node in list(graph.graph.node):
        if node.op_type != "GlobalAveragePool":
            continue
        found = _layer_norm(graph, node)
        if found is None:
            continue
        x, gamma, beta, epsilon, output, final = found
        graph.replace(final, [helper.make_node(
            "LayerNormalization",
            [x, graph.add_initializer("gamma", gamma.astype(np.float32)),
             graph.add_initializer("beta", beta.astype(np.float32))], [output],
            name=final.name + "/fused", axis=-1, epsilon=epsilon)])
        count += 1
    return count


def _scalar_input(graph, node, value):
    """The input of binary `node` other than a scalar constant equal to `value` (float32
    rounding), else None."""
    for index in (0, 1):
        constant = graph.constant(node.input[1 - index])
        if constant is not None and constant.size == 1 and np.float32(
                constant.reshape(())) == np.float32(value):
            return node.input[index]
    return None


def fuse_gelu(graph):
    """Every exact GELU `x * 0.5 * (1 + erf(x / sqrt(2)))` (as tf2onnx writes Keras' `gelu`:
    `Mul(0.5, x) * (1 + Erf(x * 0.70710677))`) as one `com.microsoft` `Gelu`; the count."""
    count = 0
    for erf in [node for node in graph.graph.node if node.op_type == "Erf"]:
        scaled = graph.node(erf.input[0], "Mul")
        x = scaled and _scalar_input(graph, scaled, 1 / np.sqrt(2))
        plus_one = graph.only_consumer(erf.output[0])
        if x is None or plus_one is None or plus_one.op_type != "Add" or (
                _scalar_input(graph, plus_one, 1.0) != erf.output[0]):
            continue
        final = graph.only_consumer(plus_one.output[0])
        half = final and final.op_type == "Mul" and graph.node(
            graph.other_input(final, plus_one.output[0]), "Mul")
        if not half or _scalar_input(graph, half, 0.5) != x:
            continue
        graph.replace(final, [helper.make_node("Gelu", [x], list(final.output),
                                               name=final.name + "/fused",
                                               domain=MICROSOFT_DOMAIN)])
        count += 1
    return count


def _transposed(graph, tensor, perm):
    """The tensor `Transpose(Reshape(x), perm)` splits into heads: x, or None."""
    transpose = graph.node(tensor, "Transpose")
    if transpose is None or list(transpose.attribute[0].ints) != perm:
        return None
    reshape = graph.node(transpose.input[0], "Reshape")
    return reshape.input[0] if reshape is not None else None


def _padding_mask(graph, bias):
    """`(mask, fill)` when the attention bias is `Unsqueeze(Unsqueeze((1 - Cast(mask)) * fill))`
    of a 2-D mask, else None."""
    for _ in range(2):
        unsqueeze = graph.node(bias, "Unsqueeze")
        if unsqueeze is None:
            return None
        bias = unsqueeze.input[0]
    times = graph.node(bias, "Mul")
    if times is None:
        return None
    for index in (0, 1):
        fill = graph.constant(times.input[1 - index])
        sub = graph.node(times.input[index], "Sub")
        if fill is not None and fill.size == 1 and sub is not None:
            one = graph.constant(sub.input[0])
            cast = graph.node(sub.input[1], "Cast")
            if one is not None and one.size == 1 and float(one.reshape(())) == 1.0 and cast:
                return cast.input[0], float(fill.reshape(()))
    return None


def _attention(graph, softmax, num_heads):
    """The parts of one attention block around `softmax`, or None."""
    add = graph.node(softmax.input[0], "Add")
    if add is None:
        return None
    scores = next((graph.node(name, "MatMul") for name in add.input
                   if graph.node(name, "MatMul") is not None), None)
    if scores is None:
        return None
    mask = _padding_mask(graph, graph.other_input(add, scores.output[0]))
    scaled_query = _transposed(graph, scores.input[0], [0, 2, 1, 3])
    key = _transposed(graph, scores.input[1], [0, 2, 3, 1])
    weighted = graph.only_consumer(softmax.output[0])
    if mask is None or scaled_query is None or key is None or weighted is None or (
            weighted.op_type != "MatMul" or weighted.input[0] != softmax.output[0]):
        return None
    value = _transposed(graph, weighted.input[1], [0, 2, 1, 3])
    merge = graph.only_consumer(weighted.output[0])
    context = merge and graph.only_consumer(merge.output[0])
    if value is None or merge is None or merge.op_type != "Transpose" or list(
            merge.attribute[0].ints) != [0, 2, 1, 3] or context is None or (
            context.op_type != "Reshape"):
        return None
    scaling = graph.node(scaled_query, "Mul")
    if scaling is None:
        return None
    for index in (0, 1):
        scale = graph.constant(scaling.input[1 - index])
        if scale is not None and scale.size == 1:
            query = scaling.input[index]
            break
    else:
        return None
    projections = [_dense(graph, tensor) for tensor in (query, key, value)]
    if any(found is None for found in projections):
        return None
    (query_input, *_), (key_input, *_), (value_input, *_) = projections
    hidden = projections[0][1].shape[0]
    if key_input != value_input or hidden % num_heads or any(
            found[1].shape != (hidden, hidden) for found in projections):
        return None
    return {"projections": projections, "mask": mask[0], "fill": mask[1],
            "scale": float(scale.reshape(())), "context": context}


def fuse_attention(graph, num_heads):
    """Every attention block as a `com.microsoft` `Attention` (queries, keys and values from
    one input) or `MultiHeadAttention` (queries from other rows); the counts."""
    counts = collections.Counter()
    mask_ints = {}
    for softmax in [node for node in graph.graph.node if node.op_type == "Softmax"]:
        found = _attention(graph, softmax, num_heads)
        if found is None:
            continue
        mask = found["mask"]
        if mask not in mask_ints:
            mask_ints[mask] = graph.fresh("mask_int32")
            graph.extra_nodes.append(helper.make_node(
                "Cast", [mask], [mask_ints[mask]], to=onnx.TensorProto.INT32,
                name=mask_ints[mask]))
        attributes = {"num_heads": num_heads, "scale": found["scale"],
                      "mask_filter_value": found["fill"], "domain": MICROSOFT_DOMAIN}
        (query_input, wq, bq), (key_input, wk, bk), (_, wv, bv) = found["projections"]
        biases = [np.zeros(wq.shape[1], np.float32) if b is None else b for b in (bq, bk, bv)]
        # the fused node computes the tensor tf2onnx's context reshape fed to the output Dense
        output = found["context"].input[0]
        name = found["context"].name + "/fused"
        if query_input == key_input:
            new = [helper.make_node(
                "Attention", [query_input,
                              graph.add_initializer("qkv_kernel", np.concatenate([wq, wk, wv], 1)),
                              graph.add_initializer("qkv_bias", np.concatenate(biases)),
                              mask_ints[mask]], [output], name=name, **attributes)]
            counts["Attention"] += 1
        else:
            new, projected = [], []
            for stem, source, kernel, bias in (("query", query_input, wq, biases[0]),
                                               ("key", key_input, wk, biases[1]),
                                               ("value", key_input, wv, biases[2])):
                product, summed = graph.fresh(stem), graph.fresh(stem + "_biased")
                new += [helper.make_node("MatMul", [source, graph.add_initializer(
                            stem + "_kernel", kernel)], [product], name=product),
                        helper.make_node("Add", [product, graph.add_initializer(
                            stem + "_bias", bias)], [summed], name=summed)]
                projected.append(summed)
            new.append(helper.make_node("MultiHeadAttention",
                                        projected + ["", mask_ints[mask]], [output],
                                        name=name, **attributes))
            counts["MultiHeadAttention"] += 1
        graph.replace(graph.producer[output], new)
    return dict(counts)


def fuse_encoder_graph(proto, num_heads):
    """Rewrite ONNX model `proto` (tf2onnx's graph of a kerasbert model) in place with the fused
    operators of the module docstring; return `{fused op: count}`.

    >>> import kerasbert
    >>> from kerasbert.export.onnx_model import convert_to_onnx
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=2)
    >>> proto = convert_to_onnx(encoder)
    >>> fuse_encoder_graph(proto, encoder.config.num_heads)
    {'Attention': 2, 'Gelu': 2, 'LayerNormalization': 5, 'MatMul': 8}
    """
    graph = _Graph(proto.graph)
    counts = fuse_attention(graph, num_heads)
    opset = next(entry.version for entry in proto.opset_import if entry.domain in ("", "ai.onnx"))
    if opset >= 17:  # the first with LayerNormalization
        counts["LayerNormalization"] = fuse_layer_norms(graph)
    counts["MatMul"] = fuse_dense_layers(graph)
    counts["Gelu"] = fuse_gelu(graph)
    graph.rebuild([output.name for output in proto.graph.output])
    if counts.get("Attention") or counts.get("MultiHeadAttention") or counts.get("Gelu"):
        if not any(entry.domain == MICROSOFT_DOMAIN for entry in proto.opset_import):
            proto.opset_import.append(helper.make_opsetid(MICROSOFT_DOMAIN, 1))
    return {name: count for name, count in sorted(counts.items()) if count}
