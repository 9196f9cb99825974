"""io/corpus.py finds docstrings by visiting statements only; it must find the same
definitions, in the same order, as ast.walk over the whole tree."""
import ast

from bhtcli.io.corpus import DEFINITIONS, _definitions

SOURCE = '''
"""module"""
import x
def f():
    """f"""
    def g(): pass
    lambda: (yield)
class C:
    """C"""
    async def m(self): """m"""
try:
    def t(): pass
except E:
    class H: pass
else:
    def o(): pass
finally:
    def z(): pass
if a:
    for i in b:
        while c:
            with d:
                def deep(): """deep"""
    else:
        def fe(): pass
match v:
    case 1:
        def mc(): pass
    case _:
        class MC: pass
'''


def test_definitions_in_ast_walk_order():
    tree = ast.parse(SOURCE)
    walked = [n for n in ast.walk(tree) if isinstance(n, DEFINITIONS)]
    assert list(_definitions(tree)) == walked
    assert len(walked) == 13                 # the module and twelve definitions
