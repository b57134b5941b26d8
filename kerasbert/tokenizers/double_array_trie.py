"""A darts-clone double-array trie, the format tensorflow-text's fast kernels read.

`double_array_trie({key bytes: value})` returns the trie as a list of uint32 units, laid out as
darts-clone lays them out and as tensorflow-text's `DartsCloneTrieWrapper` walks them: a node
at index `n` whose unit has offset `o` keeps its child for byte `c` at `n ^ o ^ c` (that unit's
low 8 bits are `c`), and a node that ends a key has bit 8 set and keeps the key's value in the
unit at `n ^ o` (bit 31 set, so no byte label ever matches it). Every node's `n ^ o` (its base)
is distinct, so a walk can never step into another node's child.

The kernels of tensorflow-text 2.21 do not check a walk against the array's length: they read
unit `n ^ o ^ c` for whatever byte `c` comes next. So the array reaches to the end of every
node's 256-unit block (`base | 255`), as darts-clone's own builder makes it; a shorter array
lets a walk read the memory after it and match a key that is not there.

Example:
>>> units = double_array_trie({b"ab": 7, b"b": 3})
>>> walk(units, b"ab"), walk(units, b"b"), walk(units, b"a"), walk(units, b"c")
(7, 3, None, None)
"""

_HAS_LEAF = 1 << 8
_LEAF_BIT = 1 << 31
_MAX_OFFSET = 1 << 21   # offsets below this are stored plainly: `offset << 10`
_MAX_VALUE = (1 << 31) - 1
_SEARCH_WINDOW = 1024


def double_array_trie(values):
    """The uint32 units (a list of ints) of the trie mapping each key (non-empty `bytes`) to
    its value (an int in [0, 2**31))."""
    root = {}
    for key, value in values.items():
        if not key or not isinstance(key, bytes):
            raise ValueError(f"Trie keys must be non-empty bytes, got {key!r}")
        if not 0 <= value <= _MAX_VALUE:
            raise ValueError(f"Trie value of {key!r} must be in [0, 2**31), got {value}")
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value

    units = [0]
    used = bytearray(1)    # slot 0 is the root's
    used[0] = 1
    bases = set()
    first_free = 1
    pending = [(0, root)]
    while pending:
        index, node = pending.pop()
        labels = sorted(0 if label is None else label for label in node)
        while first_free < len(used) and (used[first_free] or first_free in bases):
            first_free += 1
        base = _free_base(labels, used, bases, first_free)
        bases.add(base)
        needed = max(base ^ label for label in labels) + 1
        if needed > len(used):
            used.extend(bytes(needed - len(used)))
            units.extend([0] * (needed - len(units)))
        offset = index ^ base
        if offset >= _MAX_OFFSET:
            raise ValueError(f"The trie needs more than {_MAX_OFFSET} units")
        units[index] |= offset << 10
        for label, child in node.items():
            slot = base ^ (0 if label is None else label)
            used[slot] = 1
            if label is None:
                units[index] |= _HAS_LEAF
                units[slot] = child | _LEAF_BIT
            else:
                units[slot] = label
                pending.append((slot, child))
    end = max(bases) | 0xFF
    units.extend([0] * (end + 1 - len(units)))
    return units


def _free_base(labels, used, bases, start):
    """A base whose slots `base ^ label` are all free: the first within `_SEARCH_WINDOW` slots
    of `start`, else one in fresh space past the end (a bounded search keeps the build linear)."""
    for position in range(start, min(start + _SEARCH_WINDOW, len(used))):
        if not used[position]:
            base = position ^ labels[0]
            if base not in bases and all(
                    base ^ label >= len(used) or not used[base ^ label] for label in labels):
                return base
    base = (len(used) + 255) & ~255    # its slots are base + label, all past the end
    while base in bases:
        base += 256
    return base


def walk(units, key):
    """The value `key` maps to in `units`, or None: the walk tensorflow-text's kernels make.
    Raises IndexError where they would read past the array."""
    index, unit = 0, units[0]
    for byte in key:
        index ^= _offset(unit) ^ byte
        if index >= len(units):
            raise IndexError(f"Walking {key!r} reads unit {index}, past the trie's "
                             f"{len(units)} units")
        if units[index] & 0x800000FF != byte:
            return None
        unit = units[index]
    if not unit & _HAS_LEAF:
        return None
    return units[index ^ _offset(unit)] & _MAX_VALUE


def _offset(unit):
    return (unit >> 10) << ((unit & 0x200) >> 6)
