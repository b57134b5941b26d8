"""Whether the device a model runs on computes in bfloat16 natively, and whether XLA should
compile its steps under a bfloat16 policy.

A CPU computes in bfloat16 natively with the AVX512_BF16 or AMX-BF16 instructions (Linux shows
them as the `avx512_bf16` / `amx_bf16` flags of `/proc/cpuinfo`); an NVIDIA GPU from compute
capability 8.0 (Ampere); a TPU always. Elsewhere bfloat16 is emulated and slower than float32.

On a CPU the fast bfloat16 kernels are oneDNN's, which XLA's CPU code does not reach: measured
on an AVX512_BF16 CPU, a BERT-base classifier's training step compiled with XLA took 5.11 s in
bfloat16 against 3.10 s in float32, while without XLA bfloat16 is the faster one (BUILD.md). So
under a bfloat16 policy on a CPU, steps run without XLA (`xla_allowed`): the binaries' steps
(`precision_plan`) and `kerasbert.models.inference_function` by default. (`model.compile`'s
default, Keras' `jit_compile="auto"`, already leaves XLA off on a machine with no accelerator.)

The environment variable `KERASBERT_CPUINFO` names a file read instead of `/proc/cpuinfo`
(to see what a run would do on another CPU).

>>> cpu_bfloat16_flags("flags : fpu avx512f avx512_bf16\\n")
('avx512_bf16',)
>>> cpu_bfloat16_flags("flags : fpu avx2\\n")
()
"""

import os

CPU_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO_ENV = "KERASBERT_CPUINFO"


def cpu_bfloat16_flags(cpuinfo=None):
    """The bfloat16 flags (`CPU_FLAGS`) the CPU has, from the text of `/proc/cpuinfo` (or the file
    `KERASBERT_CPUINFO` names) unless `cpuinfo` gives it; () where it cannot be read."""
    if cpuinfo is None:
        try:
            with open(os.environ.get(CPUINFO_ENV) or "/proc/cpuinfo", encoding="utf-8") as file:
                cpuinfo = file.read()
        except OSError:
            return ()
    flags = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            flags.update(value.split())
    return tuple(flag for flag in CPU_FLAGS if flag in flags)


def device_kind(strategy=None):
    """"CPU", "GPU" or "TPU": the kind of device `strategy` (default: the current one) computes
    on."""
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    try:
        devices = [device.upper() for device in strategy.extended.worker_devices]
    except RuntimeError:  # the default strategy: TensorFlow places ops on a GPU if there is one
        devices = ["GPU"] if tf.config.list_logical_devices("GPU") else ["CPU"]
    for kind in ("TPU", "GPU"):
        if any(f"{kind}:" in device or device == kind for device in devices):
            return kind
    return "CPU"


def bfloat16_support(strategy=None):
    """`(supported, description)`: whether the device of `strategy` (default: the current one)
    computes in bfloat16 natively, and what was found (the CPU's flags, the GPUs' compute
    capabilities)."""
    import tensorflow as tf

    kind = device_kind(strategy)
    if kind == "TPU":
        return True, "TPU"
    if kind == "GPU":
        capabilities = [tf.config.experimental.get_device_details(gpu).get("compute_capability")
                        for gpu in tf.config.list_physical_devices("GPU")]
        known = [capability for capability in capabilities if capability]
        supported = bool(known) and all(tuple(capability) >= (8, 0) for capability in known)
        return supported, "GPU compute capability " + (
            ", ".join(f"{major}.{minor}" for major, minor in known) or "unknown") + (
            "" if supported else " (bfloat16 needs 8.0 or more)")
    flags = cpu_bfloat16_flags()
    if flags:
        return True, "CPU with " + ", ".join(flags)
    return False, "CPU without avx512_bf16 or amx_bf16"


def computes_in_bfloat16(policy=None):
    """Whether the dtype policy `policy` (a name or a `keras.DTypePolicy`; default: the global
    one) computes in bfloat16."""
    import keras

    if policy is None:
        policy = keras.config.dtype_policy()
    elif isinstance(policy, str):
        policy = keras.DTypePolicy(policy)
    return policy.compute_dtype == "bfloat16"


def xla_allowed(policy=None, strategy=None):
    """False when `policy` (default: the global one) computes in bfloat16 on a CPU
    (`strategy`'s, default: the current one): oneDNN's bfloat16 kernels, which XLA does not use,
    are the fast path there."""
    return not (computes_in_bfloat16(policy) and device_kind(strategy) == "CPU")


def precision_plan(policy_name, strategy, jit_compile):
    """`(jit_compile, lines)` for a run under the dtype policy `policy_name` on `strategy`
    asking for XLA with `jit_compile`: whether its steps are compiled with XLA, and what a
    binary prints at start-up about bfloat16 (nothing unless the policy computes in bfloat16;
    a line starting "Warning:" when the device does not support it).

    >>> import tensorflow as tf
    >>> plan = precision_plan("float32", tf.distribute.OneDeviceStrategy("/cpu:0"), True)
    >>> plan
    (True, [])
    """
    if not computes_in_bfloat16(policy_name):
        return jit_compile, []
    supported, description = bfloat16_support(strategy)
    allowed = xla_allowed(policy_name, strategy)
    if not allowed:
        steps = ("steps run without XLA (--jit_compile is overridden: oneDNN's bfloat16 kernels, "
                 "the fast path on a CPU, are not used under XLA)" if jit_compile else
                 "steps run without XLA (oneDNN's bfloat16 kernels)")
    else:
        steps = "steps compiled with XLA" if jit_compile else "steps run without XLA"
    lines = [f"bfloat16: {'supported' if supported else 'NOT supported'} by this device "
             f"({description}); {steps}"]
    if not supported:
        lines.append(f"Warning: {policy_name} on a device without native bfloat16 "
                     f"({description}): it is emulated and slower than float32 there; "
                     "--mixed_precision=float32 trains faster")
    return jit_compile and allowed, lines
