"""When a pyc's code is its source's: the one comparison the compiler and the verifier share.

``SAME`` is Python source, run inside the environment's own interpreter (never imported here:
the code objects it compares belong to that interpreter's version). It defines
``same(a, b)``: ``==`` on code objects (bytecode, constants, names, line and exception
tables, recursively; not ``co_filename``, which is where the file was compiled), every
``co_qualname`` equal too, and constants compared by their bits so that a NaN constant equals
itself. Two programs embed it:

    samebits.install.bytecode   the install's compiler: it compiles each source, writes the
                                pyc, and checks the body it wrote against the code it compiled,
                                so its verdict is the verifier's own check, made once
    verify.env.pycheck          the verifier: it unmarshals a placed pyc and compares it with a
                                fresh compile of the placed source

``hash_head(data, source)`` is how both read a hash-based pyc's header: `` hash-ok`` when it
holds the source's siphash as that interpreter's ``_imp.source_hash`` computes it, else
`` hash-stale`` (a timestamp pyc: empty). The text needs ``sys`` imported before it.
"""

SAME = r"""
import _imp
CODE = type(compile('', '', 'exec'))
ATTRS = ('co_argcount', 'co_posonlyargcount', 'co_kwonlyargcount', 'co_flags',
         'co_firstlineno', 'co_stacksize', 'co_code', 'co_names', 'co_varnames',
         'co_freevars', 'co_cellvars', 'co_name', 'co_qualname', 'co_linetable',
         'co_lnotab', 'co_exceptiontable')
def key(x):
    t = type(x)
    if t is float:
        return ('f', x.hex())
    if t is complex:
        return ('c', x.real.hex(), x.imag.hex())
    if t is tuple:
        return ('t', tuple(key(y) for y in x))
    if t is frozenset:
        return ('s', frozenset(key(y) for y in x))
    if t is CODE:
        return ('k', id(x))
    return (t.__name__, x)
def same(a, b):
    if a == b and getattr(a, 'co_qualname', 0) == getattr(b, 'co_qualname', 0):
        codes = [(x, y) for x, y in zip(a.co_consts, b.co_consts) if type(x) is CODE]
        return all(same(x, y) for x, y in codes)
    for name in ATTRS:  # == says no: NaN constants are never equal to themselves
        if getattr(a, name, None) != getattr(b, name, None):
            return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if type(x) is CODE or type(y) is CODE:
            if type(x) is not type(y) or not same(x, y):
                return False
        elif key(x) != key(y):
            return False
    return True
def hash_head(data, source):
    '''' hash-ok' / ' hash-stale' for a hash-based pyc, '' for a timestamp one.'''
    if not int.from_bytes(data[4:8], 'little') & 1:
        return ''
    raw = sys.modules['_frozen_importlib_external']._RAW_MAGIC_NUMBER
    return ' hash-ok' if data[8:16] == _imp.source_hash(raw, source) else ' hash-stale'
"""
