#!/usr/bin/env python3
"""Regenerates the template case tables (cases/*.json next to this file, which
cases_test.cpp runs) from the cases listed below.

Every expectation is produced by jinja2 itself, configured as transformers configures it for
chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
{% generation %}, transformers' tojson, raise_exception, strftime_now fixed to
2026-11-29 12:00), never by tandem. Needs: pip install jinja2 (3.1).
"""
import datetime
import json
import os
import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

class AssistantTracker(Extension):
    tags = {"generation"}
    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)
    def _generation_support(self, caller):
        return caller()

def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def strftime_now(fmt):
    return datetime.datetime(2026, 11, 29, 12, 0, 0).strftime(fmt)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now


def oracle(cases):
    out = []
    for t, ctx in cases:
        try:
            out.append({"text": env.from_string(t).render(**ctx)})
        except Exception as e:
            out.append({"error": type(e).__name__ + ": " + str(e)})
    return out

def group(suite, name, comment, cases):
    cases_out = []
    for (t, ctx), r in zip(cases, oracle(cases)):
        case = {"source": t}
        if ctx:
            case["context"] = ctx
        case.update(r)
        cases_out.append(case)
    return {"suite": suite, "name": name, "comment": comment, "cases": cases_out}

def emit(path, doc, groups):
    out = {"doc": doc, "groups": [group(*g) for g in groups]}
    with open(path, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")

D = os.path.dirname(os.path.abspath(__file__)) + "/cases/"
N = None
def c(src, **ctx): return (src, ctx)

# ------------------------------------------------------------------ whitespace
emit(D + "whitespace.json", "Lexer whitespace rules: trim_blocks, lstrip_blocks, -/+ markers, comments, raw.", [
 ("JinjaWhitespace", "TrimBlocks", "trim_blocks drops the newline right after %} and #}, never after }} or +%}", [
   c("{% if true %}\nA{% endif %}\nB"),
   c("{{ 'x' }}\nB"),
   c("{# note #}\nB"),
   c("{% if true +%}\nA{% endif +%}\nB"),
   c("{% if true %}\n\nA{% endif %}"),
   c("{% set x = 1 %}\r\nA"),
 ]),
 ("JinjaWhitespace", "LstripBlocks", "lstrip_blocks drops spaces/tabs before {% and {# at a line start, not before {{", [
   c("a\n    {% if true %}b{% endif %}"),
   c("a\n\t {% if true %}\n\t b\n\t {% endif %}\n"),
   c("a\n    {{ 'v' }}"),
   c("a\n    {# c #}b"),
   c("a  {% if true %}b{% endif %}"),
   c("a\n  {%+ if true %}b{% endif %}"),
   c("{% if true %}\n    {% if true %}x{% endif %}\n{% endif %}"),
   c("  {% if true %}start of template{% endif %}"),
   c("x\n  \u00a0{% if true %}nbsp is whitespace too{% endif %}"),
 ]),
 ("JinjaWhitespace", "MinusMarkers", "- strips all whitespace (newlines included) on its side", [
   c("a  \n\n  {%- if true %}b{% endif %}"),
   c("{% if true -%}  \n\n  b{% endif %}"),
   c("<{{- ' x ' -}}>"),
   c("a \n {#- c -#} \n b"),
   c("{%- for i in [1, 2] %}\n  {{ i }}\n{%- endfor %}"),
   c("{% for i in [1, 2] -%}\n  {{ i }}\n{% endfor %}"),
 ]),
 ("JinjaWhitespace", "RawBlocks", "raw blocks are data; their own tags follow the block rules", [
   c("{% raw %}{{ x }} {% if %}{% endraw %}"),
   c("a {%- raw -%}  {{ x }}  {%- endraw -%}  b"),
   c("{% raw %}\nkeeps newline{% endraw %}\nafter"),
   c("  {% raw %}x{% endraw %}  \n y"),
 ]),
 ("JinjaWhitespace", "Newlines", "\\r\\n and \\r become \\n; one trailing newline is dropped", [
   c("a\r\nb\rc\n"),
   c("a\n\n"),
   c("{{ 'x' }}\n"),
   c(""),
 ]),
 ("JinjaWhitespace", "Delimiters", "braces inside expressions, strings holding delimiters, adjacent strings", [
   c("{{ {'a': {'b': 1}} }}|{{ {'a': {'b': 1}}['a']['b'] }}"),
   c("{{ '%}' }}{{ \"}}\" }}{{ '{#' }}"),
   c("{{ 'a' 'b' \"c\" }}"),
   c("{%   if   true   %}ok{%endif%}"),
 ]),
])

# ------------------------------------------------------------------ values
emit(D + "values.json", "Python rendering of values: str()/repr() of scalars and containers, Markup, tojson.", [
 ("JinjaValues", "Scalars", "True/False/None, ints and floats as Python prints them", [
   c("{{ true }} {{ false }} {{ none }} {{ True }} {{ None }} {{ 42 }} {{ -7 }}"),
   c("{{ 1.0 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 0.1 + 0.2 }} {{ -0.0 }} {{ 1/3 }} {{ 10/2 }} {{ 2.5e-4 }} {{ 1e15 }} {{ 0.0001 }} {{ 1e100 }} {{ 5e-324 }}"),
   c("{{ n }} {{ f }} {{ g }} {{ b }} {{ z }}", n=3, f=2.0, g=1e-7, b=True, z=None),
   c("{{ x }}|{{ x is defined }}"),
 ]),
 ("JinjaValues", "Containers", "lists, dicts and tuples print as their Python repr", [
   c("{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}"),
   c("{{ {'a': 1, 'b': [1, 2], 'c': {'d': none}} }}"),
   c("{{ (1,) }} {{ (1, 2) }} {{ () }} {{ [] }} {{ {} }}"),
   c("{{ ['it\\'s', 'a\"b', 'both\\'\"', 'nl\\n', 'tab\\t', '\\x00', '\\x7f', 'é', '\\u200b', '\\xa0', '\\\\'] }}"),
   c("{{ msgs }}", msgs=[{"role": "user", "content": "hi"}]),
   c("{{ range(3) }} {{ range(1, 10, 2) }} {{ range(10)[2:5] }}"),
   c("{{ {'a': 1}.items() }} {{ {'a': 1}.keys() }} {{ {'a': 1}.values() }}"),
   c("{{ {1: 'a', 2.0: 'b', true: 'c', none: 'd'} }}"),
 ]),
 ("JinjaValues", "Markup", "|safe strings escape what is added to them; ~ gives plain strings", [
   c("{{ ('<a>'|safe) + '<b>' }}|{{ '<c>' + ('<d>'|safe) }}|{{ '<x>'|e }}|{{ ('<a>'|safe) ~ '<b>' }}"),
   c("{{ ('<'|safe).replace('<', '>') }} {{ ('x%s'|safe) % '<' }} {{ ('{}'|safe).format('<') }} {{ ('<'|safe).join(['<', '>']) }} {{ ('a'|safe) * 2 }}"),
   c("{{ '<b>'|safe|upper }} {{ ('<a>'|safe)|trim }} {{ ('<a>'|safe)|replace('a', '<') }} {{ ['<', '>'|safe]|join(',') }}"),
   c("{{ 'Use ' |safe + t.name + ': ' + t|tojson }}", t={"name": "a&b", "x": "\"q\""}),
 ]),
 ("JinjaValues", "ToJson", "transformers' tojson: json.dumps(ensure_ascii=False), (', ', ': ') or (',', ': ') with indent", [
   c("{{ [1, 2] }} {{ [1, 2]|tojson }} {{ {'a': 'é', 'b': [1, 2.5, none, true]}|tojson }}"),
   c("{{ 'x\"y\\n\\t\\\\'|tojson }} {{ '\\x1f\\x7f\\u2028'|tojson }} {{ '</script>'|tojson }}"),
   c("{{ {'a': {'b': 1}, 'c': []}|tojson(indent=2) }}"),
   c("{{ [[1, [2, []]], {}]|tojson(indent=1) }}|{{ {'a': 1}|tojson(indent='\\t') }}"),
   c("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ 'é😀'|tojson(ensure_ascii=true) }} {{ [1, 2]|tojson(separators=(',', ':')) }}"),
   c("{{ x|tojson }}", x={"k": [1, 2, {"z": None}], "f": 1.0, "big": 1e16, "u": "ü😀"}),
   c("{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }} {{ (1, 2)|tojson }}"),
   c("{{ undefined_thing|tojson }}"),
   c("{{ namespace(a=1)|tojson }}"),
 ]),
])

# ------------------------------------------------------------------ expressions
emit(D + "expressions.json", "Expressions with Python semantics: arithmetic, comparisons, logic, subscripts, slicing, % formatting.", [
 ("JinjaExpressions", "Arithmetic", "// and % floor toward -inf, ** is left-associative in Jinja, / is true division", [
   c("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}"),
   c("{{ 1 + true }} {{ 1.5 + 1 }} {{ 3 - 1.5 }} {{ 2 * 2.5 }} {{ -2 ** 2 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -x }} {{ +x }}", x=5),
   c("{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1] * 3 }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'x' * -1 }}|{{ 'ab' * true }}"),
   c("{{ 'a' ~ 1 ~ none ~ true ~ undefined_var ~ [1] }}"),
   c("{{ 'a' + 1 }}"),
   c("{{ 1 + 'a' }}"),
   c("{{ [1] + (2,) }}"),
   c("{{ none + 1 }}"),
   c("{{ undefined_var + 1 }}"),
   c("{{ 1 / 0 }}"),
   c("{{ 1 // 0 }}"),
   c("{{ 5 % 0 }}"),
 ]),
 ("JinjaExpressions", "Comparisons", "chains, cross-type equality, `in`, ordering errors", [
   c("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'B' < 'a' }} {{ 'é' > 'z' }}"),
   c("{{ 'a' in 'abc' }} {{ 1 in [1,2] }} {{ 'k' in {'k':1} }} {{ 3 not in [1] }} {{ 'x' in u }} {{ u in [1] }}"),
   c("{{ 1 == none }} {{ none == none }} {{ u == none }} {{ u == v }} {{ [] == [] }} {{ [1] == (1,) }} {{ {'a':1} == {'a':1.0} }} {{ 'a' != 'b' }}"),
   c("{{ 'a' < 1 }}"),
   c("{{ 'x' in 1 }}"),
   c("{{ 1 in 'abc' }}"),
   c("{{ u < 1 }}"),
 ]),
 ("JinjaExpressions", "Logic", "and/or return an operand; inline if without else is undefined", [
   c("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' or none }} {{ [] and 1 }} {{ not 0 }} {{ not 'a' }} {{ not u }}"),
   c("{{ 'yes' if true else 'no' }} {{ 'yes' if false }}|{{ 1 if 0 else 2 if 0 else 3 }}|{{ x.y if x }}"),
   c("{% if not a is none %}1{% endif %}{% if a is defined and a %}2{% endif %}{% if a is not none %}3{% endif %}", a=0),
 ]),
 ("JinjaExpressions", "Subscripts", "attribute vs item lookup; dict methods win over keys; misses are undefined", [
   c("{{ x[0] }}|{{ x.0 }}|{{ x['a'] }}|{{ x.a }}", x={"a": 1}),
   c("{{ d['items'] }}|{{ d.get('items') }}|{{ d.keys is defined }}|{{ d.items is defined }}", d={"items": 5, "keys": 6}),
   c("{{ m.content }}|{{ m['role'] }}|{{ m.missing }}|{{ m.missing is defined }}", m={"role": "user", "content": "hi"}),
   c("{{ messages[0].content }}|{{ messages[-1]['role'] }}|{{ messages[5] is defined }}", messages=[{"role": "user", "content": "hi"}]),
   c("{{ x['items'].type }}|{{ x.items.type is defined }}", x={"items": {"type": "string"}}),
   c("{{ [1,2][1.5] is defined }}|{{ x[none] is defined }}|{{ 'abc'['x'] is defined }}|{{ none.x is defined }}", x={}),
   c("{{ x.y.z }}"),
   c("{{ x['y'] }}"),
 ]),
 ("JinjaExpressions", "Slicing", "Python slices on str (by code point), list, tuple and range", [
   c("{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'hello'[-3:] }} {{ 'hello'[:-1] }} {{ 'hello'[::2] }} {{ 'hello'[10:] }}|{{ 'hello'[-100:2] }} {{ 'héllo'[1] }} {{ 'héllo'[1:3] }}"),
   c("{{ [1,2,3,4][1:] }} {{ [1,2,3,4][::-2] }} {{ [1,2,3][5:] }} {{ (1,2,3)[1:] }} {{ [1,2,3][-1] }} {{ range(10)[::3]|list }}"),
   c("{{ s[1:2:0] }}", s="abc"),
 ]),
 ("JinjaExpressions", "PercentFormat", "str % args, printf style", [
   c("{{ '%s and %d' % ('a', 3) }} {{ '%05.2f|%-4s|%x|%r' % (3.14159, 'ab', 255, 'q') }} {{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }} {{ '%s' % [1,2] }} {{ '%%' % () }}"),
   c("{{ '%i' % 3.9 }} {{ '%c' % 65 }} {{ '%o' % 8 }} {{ '%e' % 1234.5 }} {{ '%g' % 0.0001234 }} {{ '%+d' % 3 }} {{ '% d' % 3 }} {{ '%-5d|' % 3 }} {{ '%05d' % -3 }} {{ '%.3s' % 'abcdef' }} {{ '%*d' % (5, 3) }}"),
   c("{{ 'abc' % [1, 2] }}|{{ '%s' % [1, 2] }}|{{ 'x' % u }}|{{ '%s!' % u }}"),
   c("{{ '%s %s' % ('a',) }}"),
   c("{{ '%s' % ('a', 'b') }}"),
   c("{{ '%d' % 'x' }}"),
 ]),
 ("JinjaExpressions", "Literals", "list/dict/tuple literals with trailing commas, calls with * and **", [
   c("{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1, 2,) }} {{ {(1, 2): 'a'}[(1, 2)] }} {{ {1: 'a'}[1.0] }}"),
   c("{% macro f(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ f(1,) }} {{ f(*[1, 2]) }} {{ f(**{'a': 3, 'b': 4}) }} {{ f(1, **{'b': 5}) }}"),
   c("{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 1e3 }} {{ 2.5E-1 }}"),
 ]),
])

# ------------------------------------------------------------------ statements
emit(D + "statements.json", "Statements: if, for (loop variables, else, filter, break/continue, recursive), set, namespace, macros, call/filter/with blocks.", [
 ("JinjaStatements", "Loops", "loop.* variables, for-else, `for x in y if c`, break/continue, unpacking", [
   c("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
   c("{% for x in 'abc' %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }};{% endfor %}"),
   c("{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in [1] %}a{% else %}empty{% endfor %}|{% for x in u %}a{% else %}b{% endfor %}"),
   c("{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }}{% if loop.last %}L{% endif %},{% endfor %}"),
   c("{% for x in range(10) %}{% if x > 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
   c("{% for a, b in [(1, 2), (3, 4)] %}{{ a }}{{ b }}{% endfor %}|{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}"),
   c("{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{% endfor %}{{ loop.index }}|{% endfor %}"),
   c("{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(x > 1) }}{% endfor %}"),
   c("{% for x in [1,2] %}{% set outer = loop %}{% for y in [3] %}{{ outer.index }}{{ loop.index }}{% endfor %}{% endfor %}"),
   c("{% for item in tree recursive %}[{{ item.n }}{{ loop.depth }}{% if item.c %}{{ loop(item.c) }}{% endif %}]{% endfor %}", tree=[{"n": "a", "c": [{"n": "b", "c": [{"n": "c"}]}]}, {"n": "d"}]),
   c("{% for x in [1, 2] %}{{ x }}{% break %}{% else %}E{% endfor %}|{% for x in 'ab' %}{% continue %}{% else %}E{% endfor %}|{% for x in 'ab' %}{% if x == 'b' %}{% continue %}{% endif %}{% else %}E{% endfor %}"),
   c("{% for x in none %}{% endfor %}"),
   c("{% for a, b in [(1,2,3)] %}{% endfor %}"),
   c("{% for x in [1] %}{{ loop([2]) }}{% endfor %}"),
 ]),
 ("JinjaStatements", "Scoping", "loop bodies and macros get their own scope; if-blocks do not; namespaces carry state", [
   c("{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}"),
   c("{% set ns = namespace(c=0) %}{% for i in [1,2,3] %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}"),
   c("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"),
   c("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}"),
   c("{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]{% set y | upper %}up{% endset %}{{ y }}"),
   c("{% set ns = namespace() %}{% set ns.a = 1 %}{{ ns.a }}{{ ns.b }}{{ ns }}"),
   c("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"),
   c("{% with a = 1, b = 2 %}{{ a }}{{ b }}{% endwith %}{{ a }}"),
   c("{% filter upper %}hello {{ 'x' }}{% endfilter %}"),
   c("{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% set msgs = messages[1:] %}{% else %}{% set sys = none %}{% set msgs = messages %}{% endif %}{{ sys }}|{{ msgs|length }}", messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]),
   c("{% set bos_token = 'B' %}{{ bos_token }}", bos_token="<s>"),
   c("{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ add_generation_prompt }}", add_generation_prompt=True),
   c("{% set x = 1 %}{% set x.a = 2 %}"),
   # a name first assigned unconditionally in a frame is undefined there until assigned,
   # even for nested frames and even when the context has it (jinja2's symbol analysis)
   c("{% for i in [1] %}[{{ x }}]{% endfor %}{% set x = 'S' %}{{ x }}", x="C"),
   c("{% macro m() %}[{{ x }}]{% endmacro %}{{ m() }}{% set x = 'S' %}{{ m() }}", x="C"),
   c("{% for i in [1] %}[{{ x }}]{% endfor %}{% if true %}{% set x = 'S' %}{% endif %}{{ x }}", x="C"),
   c("{% for i in [1] %}[{{ x }}]{% endfor %}{% set x = x ~ '!' %}{{ x }}", x="C"),
   c("{% for i in [1, 2] %}{% for j in [1] %}[{{ y }}]{% endfor %}{% set y = i %}{% endfor %}", y="C"),
 ]),
 ("JinjaStatements", "Macros", "defaults, keyword arguments, varargs/kwargs, caller, recursion, closures", [
   c("{% macro f(a, b=2, c='x') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ f(1) }}|{{ f(1, 3) }}|{{ f(1, c='z') }}|{{ f() }}|{{ f }}"),
   c("{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, x=4) }}"),
   c("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"),
   c("{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}body{{ 1 }}{% endcall %}"),
   c("{% macro wrap() %}[{{ caller(5) }}]{% endmacro %}{% call(x) wrap() %}v{{ x }}{% endcall %}"),
   c("{% set g = 'G' %}{% macro f() %}{{ g }}{{ h }}{% endmacro %}{% set h = 'H' %}{{ f() }}"),
   c("{% macro f() %}{% set inner = 1 %}{{ inner }}{% endmacro %}{{ f() }}{{ inner }}"),
   c("{% macro f(x) %}{{ x|length }}{% endmacro %}{% set r = f('abc') %}{{ r }}{{ r is string }}"),
   c("{% macro f(a, b=a) %}{{ b }}{% endmacro %}{{ f(4) }}"),
   c("{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}"),
   c("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}"),
   c("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, b=2) }}"),
 ]),
 ("JinjaStatements", "OtherTags", "generation (transformers), print, block, raw-less autoescape false", [
   c("{% for m in ['a', 'b'] %}{% generation %}<{{ m }}>{% endgeneration %}{% endfor %}"),
   c("{% print 'a', 1 %}|{% print 'b' %}"),
   c("{% block body %}in block {{ 1 }}{% endblock %} after{% block b2 %}x{% endblock b2 %}"),
   c("{% autoescape false %}<{{ '<' }}>{% endautoescape %}"),
   c("{% if false %}{% include 'x.html' %}{% endif %}ok"),
   c("{{ strftime_now('%Y-%m-%d %H:%M %A %B %d %b %j') }}"),
 ]),
])

# ------------------------------------------------------------------ filters
emit(D + "filters.json", "Builtin filters, following jinja2's definitions and quirks.", [
 ("JinjaFilters", "DefaultAndLength", "default replaces only undefined unless boolean=true; length/count", [
   c("{{ x|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|default('d') }}|{{ none|d('d', true) }}|{{ 0|default(5, boolean=true) }}|{{ u|default }}|"),
   c("{{ 'abc'|length }} {{ [1,2]|count }} {{ {'a':1}|length }} {{ x|length }} {{ 'héllo'|length }} {{ [1,2]|length() }}"),
   c("{{ none|length }}"),
 ]),
 ("JinjaFilters", "Text", "case, trim, replace, indent (first/blank), center, truncate, wordcount, format", [
   c("{{ 'hello world'|upper }} {{ 'HeLLo'|lower }} {{ 'hello world-foo (bar) x'|title }} {{ 'hELLO wORLD'|capitalize }} {{ \"they're bill's\"|title }}"),
   c("[{{ '  a b  '|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ '\\n a \\t'|trim }}] [{{ '\\u3000x\\u3000'|trim }}]"),
   c("{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 5|replace('5', 'five') }}"),
   c("{{ 'line1\\nline2\\n\\nline4'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('>>') }}|{{ ''|indent(first=true) }}|"),
   c("{{ 'a b  c\\nd'|wordcount }} {{ 'abc'|center(9) }}|{{ 'foo bar baz qux'|truncate(9) }} {{ 'foo bar baz qux'|truncate(9, True) }} {{ 'foo bar baz qux'|truncate(11) }} {{ 'foo bar baz qux'|truncate(11, False, '...', 0) }}"),
   c("{{ '%s-%s'|format(1, 2) }} {{ '%(a)s'|format(a='x') }} {{ 42|string }}{{ none|string }}{{ [1]|string }}"),
   c("{{ '<b>x</b> <!-- c --> &amp; y'|striptags }} {{ '<a>'|e }} {{ '<a>'|escape|safe }} {{ '<a>'|forceescape }} {{ 'a b&c'|urlencode }} {{ {'a': 'b c', 'd': 1}|urlencode }}"),
   c("{{ {'a': 1, 'b': none}|xmlattr }}|{{ [1,[2]]|pprint }}|{{ 1000|filesizeformat }} {{ 1|filesizeformat }} {{ 1500000|filesizeformat(true) }}"),
 ]),
 ("JinjaFilters", "Numbers", "int/float parsing with defaults, abs, round (half to even, ceil, floor)", [
   c("{{ 3.0|int }} {{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ true|int }}"),
   c("{{ '3.5'|float }} {{ 3|float }} {{ 'x'|float }} {{ 'inf'|float }} {{ '1e3'|float }} {{ none|float }}"),
   c("{{ -3|abs }} {{ (-3.5)|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 42.55|round(1, 'floor') }} {{ 42.51|round(1, 'ceil') }} {{ 5|round }} {{ 1234|round(-2) }}"),
 ]),
 ("JinjaFilters", "Sequences", "first/last/join/list/sort/unique/min/max/sum/reverse/dictsort/items/batch/slice/groupby", [
   c("{{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ 'abc'|first }} {{ []|first }}|{{ {'a':1,'b':2}|first }} {{ {'a':1,'b':2}|last }}"),
   c("{{ [1,2,3]|join(', ') }} {{ ['a','b']|join }} {{ [{'n':1},{'n':2}]|join('-', attribute='n') }} {{ 'abc'|join('.') }} {{ [1.0, none]|join(',') }}"),
   c("{{ 'abc'|list }} {{ {'a':1}|list }} {{ (1,2)|list }} {{ x|list }}"),
   c("{{ [3,1,2]|sort }} {{ [3,1,2]|sort(reverse=true) }} {{ ['b','A','c']|sort }} {{ ['b','A','c']|sort(case_sensitive=true) }} {{ [{'n':2},{'n':1}]|sort(attribute='n') }} {{ [{'a':1,'b':2},{'a':1,'b':1}]|sort(attribute='a,b') }}"),
   c("{{ [1,2,1,3]|unique|list }} {{ ['a','A','b']|unique|list }} {{ [1,2,3]|reverse|list }} {{ 'abc'|reverse }} {{ [3,1,2]|min }} {{ [3,1,2]|max }} {{ ['a','B']|max }} {{ []|min }}|"),
   c("{{ [1,2,3]|sum }} {{ [{'v':1},{'v':2}]|sum(attribute='v') }} {{ [1,2]|sum(start=10) }} {{ [0.5, 1]|sum }}"),
   c("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }} {{ {'B':1,'a':2}|dictsort }} {{ {'B':1,'a':2}|dictsort(true) }}"),
   c("{% for k, v in {'b': 1, 'a': 2}|items %}{{ k }}{{ v }}{% endfor %}|{% for k, v in x|items %}{% endfor %}|{{ {'a':1}|items|list }}"),
   c("{{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3,4,5]|batch(2, 0)|list }} {{ [1,2,3,4,5]|slice(2)|list }} {{ [1,2,3,4,5]|slice(2, 'f')|list }}"),
   c("{% for g in [{'c':'x','v':1},{'c':'y','v':2},{'c':'X','v':3}]|groupby('c') %}{{ g.grouper }}:{{ g.list|map(attribute='v')|list }};{% endfor %}"),
   c("{{ {'a':1}|attr('a') }}|{{ 'abc'|attr('upper') is defined }}|{{ [1,2]|random in [1,2] }}"),
   c("{{ [1,'a']|sort }}"),
   c("{{ x|items|list }}", x=[1]),
 ]),
 ("JinjaFilters", "MapSelect", "map/select/reject(attr) apply filters/tests lazily and return generators", [
   c("{{ ['a','b']|map('upper')|list }} {{ [{'n':'x'},{'m':1}]|map(attribute='n')|list }} {{ [{'n':'x'},{'m':1}]|map(attribute='n', default='D')|list }} {{ ['a b']|map('replace', ' ', '_')|list }}"),
   c("{{ [1,2,3,4]|select('odd')|list }} {{ [1,2,3,4]|reject('odd')|list }} {{ [0,1,'',2]|select|list }} {{ [1,5,10]|select('gt', 4)|list }} {{ ['a','b']|select('in', ['a'])|list }}"),
   c("{{ ms|selectattr('role', 'equalto', 'user')|list }} {{ ms|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }} {{ ms|selectattr('x')|list }} {{ ms|selectattr('x', 'defined')|list|length }}", ms=[{"role": "user"}, {"role": "assistant", "x": 1}]),
   c("{% set g = [3,1]|map('string') %}{{ g|list }}{{ g|list }}|{{ [1]|map('string') is sequence }}|{{ [1]|map('string') is iterable }}"),
   c("{% set lazy = x|items %}{% set lazy2 = none|map('upper') %}not iterated, no error", x=[1]),
   c("{{ tools|selectattr('type', 'equalto', 'code_interpreter')|list|length > 0 }}", tools=[{"type": "function"}]),
   c("{{ [1,2]|map('nofilter')|list }}"),
   c("{{ [1,2]|select('notest')|list }}"),
 ]),
])

# ------------------------------------------------------------------ tests
emit(D + "predicates.json", "Builtin tests (`x is defined`, `x is divisibleby 3`, ...).", [
 ("JinjaPredicates", "Types", "defined/none/boolean/number/string/mapping/sequence/iterable/callable", [
   c("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is boolean }} {{ true is number }}"),
   c("{{ 'a' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ 'a' is sequence }} {{ {} is sequence }} {{ 1 is sequence }} {{ x is sequence }} {{ (1,2) is sequence }} {{ {}.items() is sequence }}"),
   c("{{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ none is iterable }} {{ {} is iterable }}"),
   c("{{ range is callable }} {{ 'a'.upper is callable }} {{ 1 is callable }} {{ x is callable }} {% macro m() %}{% endmacro %}{{ m is callable }}"),
   c("{% set ns = namespace() %}{{ ns is mapping }} {{ ('a'|safe) is escaped }} {{ 'a' is escaped }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'zz' is filter }}"),
   c("{{ v is mapping }} {{ v is iterable }} {{ v is sequence }} {{ v is string }} {{ v is number }}", v=None),
 ]),
 ("JinjaPredicates", "Values", "odd/even/divisibleby, true/false, lower/upper, comparisons, sameas, in", [
   c("{{ 1 is odd }} {{ 2 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ false is false }} {{ true is true }} {{ 1 is true }} {{ 0 is false }}"),
   c("{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }} {{ '1' is lower }} {{ 'A1' is upper }}"),
   c("{{ none is sameas none }} {{ true is sameas true }} {{ 1 is sameas 1 }} {{ [] is sameas [] }} {{ 1 is eq 1 }} {{ 1 is ne 2 }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 1 is le 0 }} {{ 1 is in [1] }} {{ 'a' is equalto 'a' }} {{ 1 is greaterthan 0 }}"),
   c("{{ 1 is not odd }} {{ not 1 is odd }} {{ x is not none }} {{ 4 is divisibleby 2 }} {{ 'a' is in ['a'] }}"),
   c("{{ 'a' is odd }}"),
   c("{{ x is unknowntest }}"),
 ]),
])

# ------------------------------------------------------------------ methods
emit(D + "methods.json", "Python methods of str, dict, list reachable from templates, and str.format.", [
 ("JinjaMethods", "StrStripSplit", "strip/split families with Python's whitespace and maxsplit rules", [
   c("[{{ '  a  '.strip() }}] [{{ 'xxaxx'.strip('x') }}] [{{ '  a  '.lstrip() }}] [{{ '  a  '.rstrip() }}] [{{ 'abcba'.rstrip('ab') }}] [{{ '\\n\\ta b\\n'.strip() }}]"),
   c("{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b c '.split(None, 1) }} {{ ' a b c '.rsplit(None, 1) }} {{ ''.split() }} {{ ''.split(',') }}"),
   c("{{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ 'a\\nb'.splitlines(true) }} {{ 'a\\u3000b'.split() }} {{ '1,2'.split(sep=',') }} {{ 'a,b'.split(',', maxsplit=0) }}"),
   c("{{ 'a'.split('') }}"),
 ]),
 ("JinjaMethods", "StrSearch", "startswith/endswith (tuples, offsets), find/rfind/index/count by code point", [
   c("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'abcabc'.rfind('b') }} {{ 'héllo'.find('l') }} {{ 'abcabc'.count('b') }} {{ 'abc'.index('b') }}"),
   c("{{ 'abc'.index('z') }}"),
 ]),
 ("JinjaMethods", "StrTransform", "case, replace, join, partition, padding, predicates", [
   c("{{ 'a-b'.replace('-', '+') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hello world'.title() }} {{ 'hello World'.capitalize() }} {{ 'Hello'.swapcase() }} {{ \"o'neil\".title() }}"),
   c("{{ ', '.join(['a', 'b']) }} {{ ''.join('abc') }} {{ 'a b'.partition(' ') }} {{ 'a b c'.rpartition(' ') }} {{ 'abc'.partition('z') }}"),
   c("{{ '42'.isdigit() }} {{ 'ab'.isalpha() }} {{ 'a1'.isalnum() }} {{ ' '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }} {{ 'Ab Cd'.istitle() }} {{ 'x_1'.isidentifier() }} {{ ''.isdigit() }}"),
   c("{{ 'x'.center(5, '*') }} {{ 'x'.ljust(3, '.') }} {{ 'x'.rjust(3) }} {{ '42'.zfill(5) }} {{ '-42'.zfill(5) }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }} {{ 'a\\tb'.expandtabs(4) }}"),
   c("{{ 'éè'|upper }} {{ 'ÀÉÎ'|lower }} {{ 'ß'|upper }} {{ 'straße'.upper() }} {{ 'ÉCOLE'.lower() }}"),
   c("{{ ', '.join([1, 2]) }}"),
 ]),
 ("JinjaMethods", "StrFormat", "str.format with positional/named fields, conversions and format specs", [
   c("{{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='x') }} {{ '{:>5}|{:<5}|{:^5}'.format('a', 'b', 'c') }} {{ '{{}}'.format() }} {{ '{0[a]}'.format({'a': 1}) }} {{ '{x.a}'.format(x={'a': 1}) }}"),
   c("{{ '{:.2f}'.format(3.14159) }} {{ '{:05d}'.format(42) }} {{ '{:,}'.format(1234567) }} {{ '{!r}'.format('q') }} {{ '{:x}'.format(255) }} {{ '{:e}'.format(12345.678) }} {{ '{:%}'.format(0.25) }} {{ '{}'.format(1.0) }} {{ '{:g}'.format(0.00001) }} {{ '{:.3}'.format(3.14159) }}"),
   c("{{ '{}'.format(none) }} {{ '{:>4}'.format(true) }} {{ '{:d}'.format(true) }} {{ '{:*^9}'.format('mid') }} {{ '{:+d}'.format(5) }} {{ '{:#x}'.format(255) }} {{ '{:b}'.format(5) }}"),
   c("{% set T = ':x' %}{{ '<tok{}>'.format(T) }}"),
   c("{{ '{}'.format() }}"),
 ]),
 ("JinjaMethods", "DictAndList", "dict get/items/keys/values/copy; list count/index/copy", [
   c("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.copy() }} {{ 'a' in d }}", d={"a": 1, "b": 2}),
   c("{{ [1,2,1].count(1) }} {{ [1,2,3].index(2) }} {{ (1,2).index(2) }} {{ [1,2].copy() }} {{ 5.real }} {{ (2.5).is_integer() }} {{ (4).bit_length() }}"),
   c("{{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'k': 'v'}, z=3) }} {{ range(5, 0, -2)|list }} {{ range(0)|list }} {{ range(3)[1] }}"),
   c("{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner('|') %}{{ j() }}x{{ j() }}y{{ j() }}"),
   c("{{ [3].index(9) }}"),
 ]),
])

# ------------------------------------------------------------------ errors
emit(D + "errors.json", "Failures: undefined values, the immutable sandbox, syntax errors, unknown filters/tests.", [
 ("JinjaErrors", "Undefined", "undefined renders empty and is falsy, but operating on it raises UndefinedError", [
   c("[{{ u }}]{% if u %}t{% else %}f{% endif %}{% for x in u %}x{% endfor %}{{ u|length }}{{ u is defined }}"),
   c("{{ u.attr }}"),
   c("{{ u['k'] }}"),
   c("{{ u() }}"),
   c("{{ u|int }}"),
   c("{{ x.y }}", x={}),
   c("{{ x.y.z }}", x={}),
   c("{{ x[3].z }}", x=[1]),
   c("{{ 'a'() }}"),
   c("{{ x.a() }}", x={"a": 1}),
 ]),
 ("JinjaErrors", "Sandbox", "the immutable sandbox refuses mutation and private attributes", [
   c("{{ [1].append }}|{{ [1].append is defined }}|{{ {}.update is defined }}"),
   c("{% set l = [1] %}{{ l.append(2) }}"),
   c("{% set d = {} %}{% set _ = d.update({'a': 1}) %}"),
   c("{% set d = {} %}{{ d.pop('a', 1) }}"),
   c("{{ [1].pop() }}"),
   c("{{ ''.__class__ }}|{{ ''.__class__ is defined }}"),
   c("{{ ''.__class__.__mro__ }}"),
   c("{{ x._private }}", x={"_private": 5}),
   c("{{ range(100001)|length }}"),
 ]),
 ("JinjaErrors", "Syntax", "parse errors", [
   c("{{ x }}{% if true %}{{ y }}{% endif"),
   c("{% for %}"),
   c("{% endfor %}"),
   c("{% if true %}"),
   c("{% foo %}"),
   c("{{ }}"),
   c("{{ 1 + }}"),
   c("{% set 1 = 2 %}"),
   c("{% macro f(a=1, b) %}{% endmacro %}"),
   c("{# unterminated"),
   c("{% raw %}unterminated"),
   c("{{ (1, 2 }}"),
   c("{% for loop in [1] %}{% endfor %}"),
 ]),
 ("JinjaErrors", "UnknownFiltersAndTests", "unknown filters/tests fail at parse time, except inside if / inline if", [
   c("{{ x|unknownfilter }}"),
   c("{% if false %}{{ x|unknownfilter }}{% endif %}ok"),
   c("{% if true %}{{ x|unknownfilter }}{% endif %}ok"),
   c("{{ x|unknownfilter if false else 1 }}"),
   c("{% for a in [1] %}{% if false %}{{ a|from_json }}{% endif %}{% endfor %}ok"),
 ]),
])
