"""What a `tf.errors.OpError` says, in one line: TensorFlow wraps the text of a failed input check
(`tf.debugging.Assert`) and of a file error in the names of the function and op it ran in."""

import re

# TensorFlow prints a failed `tf.debugging.Assert` as "assertion failed: [part] [part] ...".
_ASSERTION = re.compile(r"assertion failed: ((?:\[[^\]\n]*\] ?)+)")
# Noise around an op error's own text: the function it ran in, the op's name.
_FUNCTION_NODE = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
_OP_SUFFIX = re.compile(r"\s*\[Op:[^\]]*\](?:\s*name:.*)?$")


def assertion_message(error):
    """The text of the input check that failed in TensorFlow (a bad corpus line, a damaged
    TFRecord, a record of the wrong length), or None if `error` is some other error.

    >>> assertion_message("assertion failed: [Corpus file] [a.txt] [is empty]")
    'Corpus file a.txt is empty'
    """
    match = _ASSERTION.search(str(error))
    return match and " ".join(re.findall(r"\[([^\]\n]*)\]", match.group(1)))


def op_error_message(error):
    """What to say of a `tf.errors.OpError`: the failed input check's text, else the first line
    of its message without TensorFlow's function and op names.

    >>> op_error_message("{{function_node f}} corrupted record at 0 [Op:ReduceDataset] name:")
    'corrupted record at 0'
    """
    assertion = assertion_message(error)
    if assertion:
        return assertion
    lines = [line.strip() for line in str(getattr(error, "message", error)).splitlines()]
    first = next((line for line in lines if line), type(error).__name__)
    return _OP_SUFFIX.sub("", _FUNCTION_NODE.sub("", first)) or type(error).__name__
