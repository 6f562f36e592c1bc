"""Authoring source of ``corpus.jsonl``: realistic agent outputs with the expected kind and extractions.

Written by hand (the expectations are not produced by the classifier). Regenerate the JSONL after an edit:

    python tests/technique/data/make_corpus.py

``tests/technique/test_technique_corpus.py`` checks that the JSONL matches this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("corpus.jsonl")
CASES: list[dict[str, Any]] = []


def C(language: str, code: str) -> dict[str, Any]:
    return {"language": language, "code": code}


def T(server: str, method: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"server": server, "method": method, "arguments": arguments or {}}


def A(agent: str, task: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"target_agent": agent, "task_description": task, "context": context or {}}


def case(
    id: str,
    category: str,
    text: str,
    kind: str,
    *,
    code: list[dict[str, Any]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    a2a: list[dict[str, Any]] | None = None,
) -> None:
    CASES.append(
        {
            "id": id,
            "category": category,
            "text": text,
            "kind": kind,
            "code_blocks": code or [],
            "tool_calls": tools or [],
            "a2a_requests": a2a or [],
        }
    )


# --------------------------------------------------------------------------------------------------------------
# prose: plain answers, including ones that talk about code, tools and delegation
# --------------------------------------------------------------------------------------------------------------
case(
    "prose-refund",
    "prose",
    "Your refund for the pro_monthly plan has been approved. You should see 19.00 USD back on your card "
    "within 5 to 7 business days.",
    "prose",
)
case(
    "prose-mentions-python",
    "prose",
    "To solve this you would write a small Python script that reads the CSV, groups rows by customer and sums "
    "the totals. I can write it if you want, but the numbers you quoted already add up to 1,240.",
    "prose",
)
case(
    "prose-mentions-tool-call",
    "prose",
    "I would normally make a tool call to the GitHub server to list the open issues, but you said you only "
    "wanted an estimate, so: there are roughly 30 open issues, most of them labelled 'bug'.",
    "prose",
)
case(
    "prose-mentions-delegation",
    "prose",
    "This looks like a billing question; I'd delegate it to the billing agent if I could. In the meantime: "
    "invoices are generated on the 1st of each month and are available under Settings > Billing.",
    "prose",
)
case(
    "prose-markdown-list",
    "prose",
    "Here is the plan:\n\n1. Reproduce the bug on a clean checkout.\n2. Bisect between v1.2 and v1.3.\n"
    "3. Write a regression test.\n4. Fix and release a patch.\n\n**Estimated effort:** half a day.",
    "prose",
)
case(
    "prose-headings-table",
    "prose",
    "## Summary\n\n| metric | before | after |\n|---|---|---|\n| p50 latency | 120 ms | 45 ms |\n"
    "| error rate | 1.2 % | 0.3 % |\n\nThe change is worth shipping.",
    "prose",
)
case(
    "prose-empty",
    "prose",
    "",
    "prose",
)
case(
    "prose-whitespace",
    "prose",
    "   \n\n\t  \n",
    "prose",
)
case(
    "prose-json-answer",
    "prose",
    '{"answer": "yes", "confidence": 0.82, "sources": ["kb-12", "kb-40"]}',
    "prose",
)
case(
    "prose-json-name-field",
    "prose",
    '{"name": "Anna Schmidt", "user_id": 42, "plan": "pro_monthly"}',
    "prose",
)
case(
    "prose-json-list",
    "prose",
    '[{"name": "alpha", "score": 3}, {"name": "beta", "score": 5}]',
    "prose",
)
case(
    "prose-apology",
    "prose",
    "I'm sorry, I can't run code or call tools in this conversation. Based on the error message you pasted, "
    "the import fails because the package is installed in a different virtual environment.",
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# prose: inline code and one-line triple backticks
# --------------------------------------------------------------------------------------------------------------
case(
    "inline-code-spans",
    "inline_code",
    "Call `client.list_issues(repo='acme/api')` and then `print(len(issues))` — the second call is cheap.",
    "prose",
)
case(
    "inline-triple-backticks",
    "inline_code",
    "You can also write it inline like ```python print('hi')``` but most renderers will not highlight it.",
    "prose",
)
case(
    "inline-triple-backticks-line-start",
    "inline_code",
    "```python import os; os.getcwd()``` is the quickest way to see where you are.",
    "prose",
)
case(
    "inline-tool-call-tag",
    "inline_code",
    "Hermes-style models wrap calls in `<tool_call>` tags, e.g. `<tool_call>{...}</tool_call>`; we don't do that here.",
    "prose",
)
case(
    "inline-tag-mid-line",
    "inline_code",
    'The format is: <tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call> — but only at the start '
    "of a line does it count.",
    "prose",
)
case(
    "inline-shell-command",
    "inline_code",
    "Run `pip install -e .[dev]` and then `pytest -q`. If `ruff` complains, run `ruff format`.",
    "prose",
)
case(
    "inline-a2a-tag",
    "inline_code",
    "An <a2a_request> tag must start a line to be taken as a delegation; this one is only mentioned.",
    "prose",
)
case(
    "inline-code-with-braces",
    "inline_code",
    'Set the header to `{"Authorization": "Bearer <token>"}` and retry the request.',
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# prose: fences that hold data, output or non-executable languages
# --------------------------------------------------------------------------------------------------------------
case(
    "fence-untagged-output",
    "data_fence",
    "The command printed:\n\n```\nTraceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'id'\n```\n\n"
    "The key is missing from the payload.",
    "prose",
)
case(
    "fence-json-data",
    "data_fence",
    'The API returned:\n```json\n{"id": 7, "status": "open", "labels": ["bug"]}\n```\nSo the issue is still open.',
    "prose",
)
case(
    "fence-yaml",
    "data_fence",
    "Add this to your workflow:\n```yaml\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
    "      - run: pytest\n```",
    "prose",
)
case(
    "fence-diff",
    "data_fence",
    "Apply this patch:\n```diff\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-import requests\n+import httpx\n```",
    "prose",
)
case(
    "fence-sql",
    "data_fence",
    "The query you want is:\n```sql\nSELECT id, amount_usd FROM refunds WHERE user_id = 42 ORDER BY created_at DESC;\n```",
    "prose",
)
case(
    "fence-console",
    "data_fence",
    "Expected session:\n```console\n$ routegate triage 'hello'\nstop_reason: success\n```",
    "prose",
)
case(
    "fence-html",
    "data_fence",
    'Use this snippet:\n```html\n<button class="btn" onclick="save()">Save</button>\n```',
    "prose",
)
case(
    "fence-text-with-python-word",
    "data_fence",
    "```text\npython is a programming language\n```",
    "prose",
)
case(
    "fence-mermaid",
    "data_fence",
    "```mermaid\ngraph TD; route-->validate; validate-->delegate;\n```",
    "prose",
)
case(
    "fence-toml",
    "data_fence",
    '```toml\n[tool.ruff]\nline-length = 120\ntarget-version = "py311"\n```',
    "prose",
)
case(
    "fence-c-compiled",
    "data_fence",
    'A C version for comparison:\n```c\n#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n```',
    "prose",
)
case(
    "fence-json-not-whole-output",
    "data_fence",
    'I will call the search tool with these arguments:\n```json\n{"name": "search", "arguments": {"q": "refund policy"}}\n'
    "```\nbut first let me check the cache.",
    "prose",
)
case(
    "fence-empty-python",
    "data_fence",
    "```python\n\n```",
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# prose: unterminated fences and tags
# --------------------------------------------------------------------------------------------------------------
case(
    "unterminated-python",
    "unterminated",
    "Here is the script:\n```python\nimport csv\nwith open('data.csv') as f:\n    rows = list(csv.reader(f))\n",
    "prose",
)
case(
    "unterminated-python-truncated-mid-line",
    "unterminated",
    "```python\nfor i in range(10):\n    print(i",
    "prose",
)
case(
    "unterminated-longer-closer-needed",
    "unterminated",
    "````python\nprint('a')\n```\nstill inside the four-backtick fence",
    "prose",
)
case(
    "unterminated-closer-with-info",
    "unterminated",
    "```python\nprint(1)\n```python\nprint(2)\n",
    "prose",
)
case(
    "unterminated-tool-call-then-prose",
    "unterminated",
    '<tool_call>\n{"name": "search", "arguments": {"q": "weather"}}\nActually, never mind, I know the answer: sunny.',
    "prose",
)
case(
    "unterminated-two-tool-call-openers",
    "unterminated",
    '<tool_call>\n{"name": "a", "arguments": {}}\n<tool_call>\n{"name": "b", "arguments": {}}',
    "prose",
)
case(
    "unterminated-a2a-fence",
    "unterminated",
    '```a2a\n{"target_agent": "reviewer", "task_description": "review PR 12"}\n',
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# prose: malformed JSON and wrong shapes
# --------------------------------------------------------------------------------------------------------------
case(
    "malformed-tool-call-json",
    "malformed_json",
    '<tool_call>\n{"name": "search", "arguments": {"q": "refund"}\n</tool_call>',
    "prose",
)
case(
    "malformed-single-quotes",
    "malformed_json",
    "<tool_call>\n{'name': 'search', 'arguments': {'q': 'refund'}}\n</tool_call>",
    "prose",
)
case(
    "malformed-trailing-comma",
    "malformed_json",
    '```tool_call\n{"name": "fs.read_file", "arguments": {"path": "README.md",}}\n```',
    "prose",
)
case(
    "malformed-arguments-list",
    "malformed_json",
    '<tool_call>\n{"name": "search", "arguments": ["refund"]}\n</tool_call>',
    "prose",
)
case(
    "malformed-arguments-string-not-json",
    "malformed_json",
    '{"name": "search", "arguments": "q=refund"}',
    "prose",
)
case(
    "malformed-extra-key",
    "malformed_json",
    '<tool_call>\n{"name": "search", "arguments": {}, "reasoning": "I need more data"}\n</tool_call>',
    "prose",
)
case(
    "malformed-bad-tool-name",
    "malformed_json",
    '<tool_call>\n{"name": "rm -rf /", "arguments": {}}\n</tool_call>',
    "prose",
)
case(
    "malformed-a2a-no-task",
    "malformed_json",
    '```a2a\n{"target_agent": "reviewer", "context": {"pr": 12}}\n```',
    "prose",
)
case(
    "malformed-a2a-two-targets",
    "malformed_json",
    '```a2a\n{"target_agent": "reviewer", "agent": "tester", "task": "check"}\n```',
    "prose",
)
case(
    "malformed-tool-list-one-bad",
    "malformed_json",
    '```tool_calls\n[{"name": "a.x", "arguments": {}}, {"name": "b.y"}]\n```',
    "prose",
)
case(
    "malformed-mistral-marker",
    "malformed_json",
    "[TOOL_CALLS] [{name: search, arguments: {q: refund}}]",
    "prose",
)
case(
    "malformed-deep-nesting",
    "malformed_json",
    "<tool_call>\n" + "[" * 5000 + "]" * 5000 + "\n</tool_call>",
    "prose",
)
case(
    "malformed-openai-missing-arguments",
    "malformed_json",
    '{"type": "function", "function": {"name": "get_weather"}}',
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# prose: nesting (fences inside fences, tags inside fences, block quotes)
# --------------------------------------------------------------------------------------------------------------
case(
    "nested-python-in-markdown",
    "nested",
    "Put this in your README:\n\n````markdown\n## Usage\n\n```python\nfrom routegate import RoutingAgent\n```\n````\n",
    "prose",
)
case(
    "nested-tool-call-in-xml-fence",
    "nested",
    'The model emitted:\n```xml\n<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>\n```\n'
    "which our parser accepts.",
    "prose",
)
case(
    "nested-a2a-in-text-fence",
    "nested",
    'Example of a delegation block:\n~~~text\n```a2a\n{"target_agent": "reviewer", "task": "review"}\n```\n~~~',
    "prose",
)
case(
    "nested-tilde-inside-backticks",
    "nested",
    "```md\n~~~python\nprint('inner')\n~~~\n```",
    "prose",
)
case(
    "blockquote-python",
    "nested",
    "As the docs say:\n\n> ```python\n> agent.run('hi')\n> ```\n\nThat is all.",
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# prose: non-English
# --------------------------------------------------------------------------------------------------------------
case(
    "fr-prose-mentions-code",
    "non_english",
    "Pour corriger l'erreur, il faut modifier la fonction `charger_donnees` : elle lit le fichier avant de "
    "vérifier qu'il existe. Je peux écrire le code si vous voulez.",
    "prose",
)
case(
    "de-prose",
    "non_english",
    "Ihre Erstattung wurde genehmigt. Der Betrag von 19,00 USD wird innerhalb von 5–7 Werktagen gutgeschrieben.",
    "prose",
)
case(
    "es-prose-tool-word",
    "non_english",
    "No puedo hacer una llamada a la herramienta ahora mismo, pero la política de reembolso permite devoluciones "
    "dentro de 14 días.",
    "prose",
)
case(
    "zh-prose",
    "non_english",
    "您的退款已经批准。款项将在五到七个工作日内退回到您的信用卡。如需帮助，请联系客服。",
    "prose",
)
case(
    "ja-prose-inline-code",
    "non_english",
    "`pip install routegate` を実行してから、`routegate triage` コマンドで試してください。",
    "prose",
)
case(
    "ru-prose",
    "non_english",
    "Я бы передал эту задачу агенту по биллингу, но могу ответить сам: счёт формируется первого числа каждого месяца.",
    "prose",
)
case(
    "ar-prose",
    "non_english",
    "تمت الموافقة على طلب الاسترداد الخاص بك، وسيظهر المبلغ في حسابك خلال خمسة إلى سبعة أيام عمل.",
    "prose",
)
case(
    "hi-prose",
    "non_english",
    "आपका रिफंड स्वीकृत हो गया है। राशि 5 से 7 कार्य दिवसों में आपके खाते में आ जाएगी।",
    "prose",
)
case(
    "emoji-prose",
    "non_english",
    "Done ✅ — deployed to staging 🚀. Next: run the smoke tests 🧪 and ping #ops.",
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# code blocks: Python
# --------------------------------------------------------------------------------------------------------------
case(
    "py-simple",
    "code_python",
    "Here's a script that prints the first ten squares:\n\n```python\nfor i in range(10):\n    print(i * i)\n```\n",
    "code_block",
    code=[C("python", "for i in range(10):\n    print(i * i)")],
)
case(
    "py-short-tag",
    "code_python",
    "```py\nimport math\nprint(math.sqrt(2))\n```",
    "code_block",
    code=[C("python", "import math\nprint(math.sqrt(2))")],
)
case(
    "py-python3-tag-uppercase",
    "code_python",
    "Run:\n```Python3\nprint('ok')\n```",
    "code_block",
    code=[C("python", "print('ok')")],
)
case(
    "py-info-string-title",
    "code_python",
    '```python title="stats.py"\nimport statistics\nprint(statistics.mean([1, 2, 3]))\n```',
    "code_block",
    code=[C("python", "import statistics\nprint(statistics.mean([1, 2, 3]))")],
)
case(
    "py-path-suffix",
    "code_python",
    "```python:src/app.py\napp = make_app()\n```",
    "code_block",
    code=[C("python", "app = make_app()")],
)
case(
    "py-pandoc-attrs",
    "code_python",
    "```{.python}\nx = 1\n```",
    "code_block",
    code=[C("python", "x = 1")],
)
case(
    "py-tilde-fence",
    "code_python",
    "~~~python\nprint('tilde')\n~~~",
    "code_block",
    code=[C("python", "print('tilde')")],
)
case(
    "py-four-backticks-with-inner-fence",
    "code_python",
    "````python\ndoc = '''\n```\nnot a fence here\n```\n'''\nprint(doc)\n````",
    "code_block",
    code=[C("python", "doc = '''\n```\nnot a fence here\n```\n'''\nprint(doc)")],
)
case(
    "py-in-list-item",
    "code_python",
    "1. Install the package.\n2. Run this:\n   ```python\n   import routegate\n   print(routegate.__version__)\n   ```\n"
    "3. Check the output.",
    "code_block",
    code=[C("python", "import routegate\nprint(routegate.__version__)")],
)
case(
    "py-closer-longer-than-opener",
    "code_python",
    "```python\nprint('closed by a longer fence')\n`````\n",
    "code_block",
    code=[C("python", "print('closed by a longer fence')")],
)
case(
    "py-closer-trailing-spaces",
    "code_python",
    "```python\nprint(1)\n```   \nDone.",
    "code_block",
    code=[C("python", "print(1)")],
)
case(
    "py-crlf",
    "code_python",
    "Script:\r\n```python\r\nprint('windows')\r\n```\r\n",
    "code_block",
    code=[C("python", "print('windows')\r")],
)
case(
    "py-two-blocks",
    "code_python",
    "First define the helper:\n```python\ndef double(x):\n    return 2 * x\n```\nThen use it:\n```python\n"
    "print(double(21))\n```",
    "code_block",
    code=[C("python", "def double(x):\n    return 2 * x"), C("python", "print(double(21))")],
)
case(
    "py-with-json-data-block",
    "code_python",
    'Input:\n```json\n{"values": [1, 2, 3]}\n```\nCode:\n```python\nimport json\nprint(sum(json.load(open("in.json"))["values"]))\n```',
    "code_block",
    code=[C("python", 'import json\nprint(sum(json.load(open("in.json"))["values"]))')],
)
case(
    "py-with-output-block",
    "code_python",
    "```python\nprint(sum(range(101)))\n```\nOutput:\n```\n5050\n```",
    "code_block",
    code=[C("python", "print(sum(range(101)))")],
)
case(
    "py-contains-tool-call-text",
    "code_python",
    '```python\nprompt = """<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>"""\nprint(len(prompt))\n```',
    "code_block",
    code=[C("python", 'prompt = """<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>"""\nprint(len(prompt))')],
)
case(
    "py-unterminated-second",
    "code_python",
    "```python\nprint('complete')\n```\nand the rest:\n```python\nprint('cut off",
    "code_block",
    code=[C("python", "print('complete')")],
)
case(
    "py-blank-lines-kept",
    "code_python",
    "```python\nimport os\n\n\nprint(os.name)\n\n```",
    "code_block",
    code=[C("python", "import os\n\n\nprint(os.name)\n")],
)
case(
    "py-fence-with-leading-spaces",
    "code_python",
    "  ```python\n  if True:\n      print('indented')\n  ```",
    "code_block",
    code=[C("python", "if True:\n    print('indented')")],
)

# --------------------------------------------------------------------------------------------------------------
# code blocks: other languages
# --------------------------------------------------------------------------------------------------------------
case(
    "bash-block",
    "code_other",
    "Run these commands:\n```bash\nset -e\npip install -e .\npytest -q\n```",
    "code_block",
    code=[C("bash", "set -e\npip install -e .\npytest -q")],
)
case(
    "sh-block",
    "code_other",
    '```sh\necho "$HOME"\n```',
    "code_block",
    code=[C("bash", 'echo "$HOME"')],
)
case(
    "shell-block",
    "code_other",
    "```shell\nls -la /tmp\n```",
    "code_block",
    code=[C("bash", "ls -la /tmp")],
)
case(
    "js-block",
    "code_other",
    "In the browser console:\n```js\nconsole.log([1, 2, 3].map(x => x * 2));\n```",
    "code_block",
    code=[C("javascript", "console.log([1, 2, 3].map(x => x * 2));")],
)
case(
    "ts-block",
    "code_other",
    "```typescript\nconst total: number = items.reduce((a, b) => a + b, 0);\n```",
    "code_block",
    code=[C("typescript", "const total: number = items.reduce((a, b) => a + b, 0);")],
)
case(
    "ruby-block",
    "code_other",
    "```ruby\nputs [1, 2, 3].sum\n```",
    "code_block",
    code=[C("ruby", "puts [1, 2, 3].sum")],
)
case(
    "mixed-languages",
    "code_other",
    "Server side:\n```python\nprint('server')\n```\nClient side:\n```javascript\nconsole.log('client');\n```",
    "code_block",
    code=[C("python", "print('server')"), C("javascript", "console.log('client');")],
)
case(
    "r-block",
    "code_other",
    "```r\nsummary(lm(mpg ~ wt, data = mtcars))\n```",
    "code_block",
    code=[C("r", "summary(lm(mpg ~ wt, data = mtcars))")],
)

# --------------------------------------------------------------------------------------------------------------
# code blocks: non-English prose around code, nested outer fences
# --------------------------------------------------------------------------------------------------------------
case(
    "fr-code",
    "code_non_english",
    "Voici une fonction qui calcule la moyenne :\n\n```python\ndef moyenne(xs):\n    return sum(xs) / len(xs)\n\n"
    "print(moyenne([2, 4, 6]))\n```\n\nElle lève une erreur si la liste est vide.",
    "code_block",
    code=[C("python", "def moyenne(xs):\n    return sum(xs) / len(xs)\n\nprint(moyenne([2, 4, 6]))")],
)
case(
    "zh-code",
    "code_non_english",
    "下面的代码会打印当前时间：\n```python\nimport datetime\nprint(datetime.datetime.now())\n```",
    "code_block",
    code=[C("python", "import datetime\nprint(datetime.datetime.now())")],
)
case(
    "de-code-unicode-strings",
    "code_non_english",
    "Beispiel:\n```python\nprint('Grüße aus München')\n```",
    "code_block",
    code=[C("python", "print('Grüße aus München')")],
)
case(
    "es-bash",
    "code_non_english",
    "Ejecuta el siguiente comando para instalar las dependencias:\n```bash\npip install -r requirements.txt\n```",
    "code_block",
    code=[C("bash", "pip install -r requirements.txt")],
)
case(
    "nested-markdown-then-python",
    "code_nested",
    "README section:\n````markdown\n```python\nprint('example only')\n```\n````\nAnd the script to run now:\n"
    "```python\nprint('run me')\n```",
    "code_block",
    code=[C("python", "print('run me')")],
)

# --------------------------------------------------------------------------------------------------------------
# tool calls: Hermes / Qwen <tool_call> tags
# --------------------------------------------------------------------------------------------------------------
case(
    "hermes-single",
    "tool_tag",
    '<tool_call>\n{"name": "github.list_issues", "arguments": {"repo": "acme/api", "state": "open"}}\n</tool_call>',
    "tool_call",
    tools=[T("github", "list_issues", {"repo": "acme/api", "state": "open"})],
)
case(
    "hermes-after-thinking",
    "tool_tag",
    "I need the current open issues before I can prioritise them.\n\n<tool_call>\n"
    '{"name": "github/list_issues", "arguments": {"repo": "acme/api"}}\n</tool_call>',
    "tool_call",
    tools=[T("github", "list_issues", {"repo": "acme/api"})],
)
case(
    "hermes-two-calls",
    "tool_tag",
    '<tool_call>\n{"name": "filesystem.read_file", "arguments": {"path": "README.md"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "filesystem.read_file", "arguments": {"path": "pyproject.toml"}}\n</tool_call>',
    "tool_call",
    tools=[
        T("filesystem", "read_file", {"path": "README.md"}),
        T("filesystem", "read_file", {"path": "pyproject.toml"}),
    ],
)
case(
    "hermes-one-line",
    "tool_tag",
    '<tool_call>{"name": "weather.get_forecast", "arguments": {"city": "Lyon", "days": 3}}</tool_call>',
    "tool_call",
    tools=[T("weather", "get_forecast", {"city": "Lyon", "days": 3})],
)
case(
    "hermes-unqualified-name",
    "tool_tag",
    '<tool_call>\n{"name": "search", "arguments": {"query": "refund policy", "top_k": 5}}\n</tool_call>',
    "tool_call",
    tools=[T("", "search", {"query": "refund policy", "top_k": 5})],
)
case(
    "hermes-unterminated-at-end",
    "tool_tag",
    'Checking the calendar.\n<tool_call>\n{"name": "calendar.list_events", "arguments": {"day": "2024-05-01"}}\n',
    "tool_call",
    tools=[T("calendar", "list_events", {"day": "2024-05-01"})],
)
case(
    "hermes-claude-code-name",
    "tool_tag",
    '<tool_call>\n{"name": "mcp__github__create_issue", "arguments": {"repo": "acme/api", "title": "Flaky test"}}\n</tool_call>',
    "tool_call",
    tools=[T("github", "create_issue", {"repo": "acme/api", "title": "Flaky test"})],
)
case(
    "hermes-indented",
    "tool_tag",
    '  <tool_call>\n  {"name": "db.query", "arguments": {"sql": "select 1"}}\n  </tool_call>',
    "tool_call",
    tools=[T("db", "query", {"sql": "select 1"})],
)
case(
    "hermes-zh-prose",
    "tool_tag",
    '我需要先查询订单状态。\n<tool_call>\n{"name": "orders.get_order", "arguments": {"order_id": "A-1029"}}\n</tool_call>',
    "tool_call",
    tools=[T("orders", "get_order", {"order_id": "A-1029"})],
)
case(
    "hermes-nested-arguments",
    "tool_tag",
    '<tool_call>\n{"name": "crm.update_contact", "arguments": {"id": 42, "fields": {"tags": ["vip", "eu"], '
    '"active": true, "score": null}}}\n</tool_call>',
    "tool_call",
    tools=[T("crm", "update_contact", {"id": 42, "fields": {"tags": ["vip", "eu"], "active": True, "score": None}})],
)

# --------------------------------------------------------------------------------------------------------------
# tool calls: OpenAI-style and other open-model shapes as the whole output
# --------------------------------------------------------------------------------------------------------------
case(
    "openai-name-arguments-string",
    "tool_openai",
    '{"name": "weather.get_forecast", "arguments": "{\\"city\\": \\"Oslo\\"}"}',
    "tool_call",
    tools=[T("weather", "get_forecast", {"city": "Oslo"})],
)
case(
    "openai-name-arguments-object",
    "tool_openai",
    '\n  {"name": "search", "arguments": {"q": "pgvector index types"}}  \n',
    "tool_call",
    tools=[T("", "search", {"q": "pgvector index types"})],
)
case(
    "openai-tool-calls-message",
    "tool_openai",
    '{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", '
    '"function": {"name": "github.get_issue", "arguments": "{\\"number\\": 12}"}}, {"id": "call_2", '
    '"type": "function", "function": {"name": "github.get_issue", "arguments": "{\\"number\\": 13}"}}]}',
    "tool_call",
    tools=[T("github", "get_issue", {"number": 12}), T("github", "get_issue", {"number": 13})],
)
case(
    "openai-function-entry",
    "tool_openai",
    '{"id": "call_9", "type": "function", "function": {"name": "fs.list_dir", "arguments": "{}"}}',
    "tool_call",
    tools=[T("fs", "list_dir", {})],
)
case(
    "openai-legacy-function-call",
    "tool_openai",
    '{"function_call": {"name": "calc.add", "arguments": "{\\"a\\": 2, \\"b\\": 3}"}}',
    "tool_call",
    tools=[T("calc", "add", {"a": 2, "b": 3})],
)
case(
    "openai-list-of-calls",
    "tool_openai",
    '[{"name": "kb.search", "arguments": {"q": "refund"}}, {"name": "kb.search", "arguments": {"q": "chargeback"}}]',
    "tool_call",
    tools=[T("kb", "search", {"q": "refund"}), T("kb", "search", {"q": "chargeback"})],
)
case(
    "llama-parameters",
    "tool_openai",
    '{"name": "weather.current", "parameters": {"location": "Paris, FR", "unit": "celsius"}}',
    "tool_call",
    tools=[T("weather", "current", {"location": "Paris, FR", "unit": "celsius"})],
)
case(
    "llama-python-tag",
    "tool_openai",
    '<|python_tag|>{"name": "stocks.quote", "parameters": {"symbol": "ACME"}}',
    "tool_call",
    tools=[T("stocks", "quote", {"symbol": "ACME"})],
)
case(
    "mistral-tool-calls-marker",
    "tool_openai",
    '[TOOL_CALLS] [{"name": "maps.geocode", "arguments": {"address": "10 Downing St, London"}}]',
    "tool_call",
    tools=[T("maps", "geocode", {"address": "10 Downing St, London"})],
)
case(
    "openai-empty-arguments-string",
    "tool_openai",
    '{"name": "clock.now", "arguments": ""}',
    "tool_call",
    tools=[T("clock", "now", {})],
)

# --------------------------------------------------------------------------------------------------------------
# tool calls: fenced
# --------------------------------------------------------------------------------------------------------------
case(
    "fence-tool-call",
    "tool_fence",
    'Let me look that up.\n```tool_call\n{"name": "kb.search", "arguments": {"q": "refund window"}}\n```',
    "tool_call",
    tools=[T("kb", "search", {"q": "refund window"})],
)
case(
    "fence-mcp-explicit",
    "tool_fence",
    '```mcp\n{"server": "github", "method": "list_issues", "arguments": {"repo": "acme/api", "labels": ["bug"]}}\n```',
    "tool_call",
    tools=[T("github", "list_issues", {"repo": "acme/api", "labels": ["bug"]})],
)
case(
    "fence-mcp-tool-params",
    "tool_fence",
    '```mcp\n{"server": "postgres", "tool": "query", "params": {"sql": "select count(*) from users"}}\n```',
    "tool_call",
    tools=[T("postgres", "query", {"sql": "select count(*) from users"})],
)
case(
    "fence-tool-calls-list",
    "tool_fence",
    '```tool_calls\n[{"name": "a.x", "arguments": {"n": 1}}, {"name": "b.y", "arguments": {"n": 2}}]\n```',
    "tool_call",
    tools=[T("a", "x", {"n": 1}), T("b", "y", {"n": 2})],
)
case(
    "fence-json-whole-output",
    "tool_fence",
    '```json\n{"name": "filesystem.read_file", "arguments": {"path": "/srv/data/report.csv"}}\n```',
    "tool_call",
    tools=[T("filesystem", "read_file", {"path": "/srv/data/report.csv"})],
)
case(
    "fence-tool-call-dash",
    "tool_fence",
    '~~~tool-call\n{"name": "slack.post_message", "arguments": {"channel": "#ops", "text": "deploy done"}}\n~~~',
    "tool_call",
    tools=[T("slack", "post_message", {"channel": "#ops", "text": "deploy done"})],
)
case(
    "fence-two-tool-fences",
    "tool_fence",
    'Step 1:\n```tool_call\n{"name": "git.status", "arguments": {}}\n```\nStep 2:\n```tool_call\n'
    '{"name": "git.diff", "arguments": {"staged": true}}\n```',
    "tool_call",
    tools=[T("git", "status", {}), T("git", "diff", {"staged": True})],
)
case(
    "fence-tool-and-bad-tool",
    "tool_fence",
    '```tool_call\n{"name": "git.status", "arguments": {}}\n```\n```tool_call\n{"name": git.log}\n```',
    "tool_call",
    tools=[T("git", "status", {})],
)

# --------------------------------------------------------------------------------------------------------------
# A2A requests
# --------------------------------------------------------------------------------------------------------------
case(
    "a2a-fence",
    "a2a",
    "This needs a security review before I can answer.\n```a2a\n"
    '{"target_agent": "security-reviewer", "task_description": "Review PR #482 for SQL injection", '
    '"context": {"repo": "acme/api", "pr": 482}}\n```',
    "a2a_request",
    a2a=[A("security-reviewer", "Review PR #482 for SQL injection", {"repo": "acme/api", "pr": 482})],
)
case(
    "a2a-tag",
    "a2a",
    '<a2a_request>\n{"target_agent": "billing", "task_description": "Issue a refund of 19.00 USD to user 42"}\n'
    "</a2a_request>",
    "a2a_request",
    a2a=[A("billing", "Issue a refund of 19.00 USD to user 42")],
)
case(
    "a2a-aliases",
    "a2a",
    '```a2a_request\n{"agent": "translator", "task": "Translate the release notes into German", '
    '"context": {"tone": "formal"}}\n```',
    "a2a_request",
    a2a=[A("translator", "Translate the release notes into German", {"tone": "formal"})],
)
case(
    "a2a-bare-json",
    "a2a",
    '{"type": "a2a_request", "target_agent": "researcher", "task_description": "Find three recent papers on '
    'calibrated routing"}',
    "a2a_request",
    a2a=[A("researcher", "Find three recent papers on calibrated routing")],
)
case(
    "a2a-list",
    "a2a",
    '```a2a\n[{"target_agent": "frontend", "task": "Add the refund button"}, '
    '{"target_agent": "backend", "task": "Expose POST /refunds"}]\n```',
    "a2a_request",
    a2a=[A("frontend", "Add the refund button"), A("backend", "Expose POST /refunds")],
)
case(
    "a2a-two-tags",
    "a2a",
    '<a2a_request>{"to": "qa", "task": "Run the regression suite"}</a2a_request>\n'
    '<a2a_request>{"to": "docs", "task": "Update the changelog"}</a2a_request>',
    "a2a_request",
    a2a=[A("qa", "Run the regression suite"), A("docs", "Update the changelog")],
)
case(
    "a2a-fr",
    "a2a",
    "Je transmets la demande à l'agent de facturation.\n```a2a\n"
    '{"target_agent": "facturation", "task_description": "Vérifier la facture F-2024-118", "context": {"langue": "fr"}}\n```',
    "a2a_request",
    a2a=[A("facturation", "Vérifier la facture F-2024-118", {"langue": "fr"})],
)
case(
    "a2a-task-whitespace-trimmed",
    "a2a",
    '```a2a\n{"target_agent": "ops", "task_description": "  Restart the worker pool  "}\n```',
    "a2a_request",
    a2a=[A("ops", "Restart the worker pool")],
)
case(
    "a2a-bare-json-without-target-agent-key",
    "a2a",
    '{"agent": "ops", "task": "restart"}',
    "prose",
)

# --------------------------------------------------------------------------------------------------------------
# mixed kinds: priority A2A > tool call > code block > prose; every recognised part is still extracted
# --------------------------------------------------------------------------------------------------------------
case(
    "mixed-a2a-and-tool",
    "mixed",
    '<tool_call>\n{"name": "kb.search", "arguments": {"q": "SLA"}}\n</tool_call>\n```a2a\n'
    '{"target_agent": "legal", "task": "Confirm the SLA wording"}\n```',
    "a2a_request",
    tools=[T("kb", "search", {"q": "SLA"})],
    a2a=[A("legal", "Confirm the SLA wording")],
)
case(
    "mixed-tool-and-code",
    "mixed",
    "I will compute it locally:\n```python\nprint(2 ** 10)\n```\nand fetch the reference value:\n<tool_call>\n"
    '{"name": "calc.power", "arguments": {"base": 2, "exp": 10}}\n</tool_call>',
    "tool_call",
    code=[C("python", "print(2 ** 10)")],
    tools=[T("calc", "power", {"base": 2, "exp": 10})],
)
case(
    "mixed-a2a-and-code",
    "mixed",
    '```python\nprint("draft")\n```\n```a2a\n{"target_agent": "reviewer", "task": "Review the draft script"}\n```',
    "a2a_request",
    code=[C("python", 'print("draft")')],
    a2a=[A("reviewer", "Review the draft script")],
)
case(
    "mixed-code-and-malformed-tool",
    "mixed",
    '```python\nprint(\'ok\')\n```\n<tool_call>\n{"name": "search", "arguments": }\n</tool_call>',
    "code_block",
    code=[C("python", "print('ok')")],
)
case(
    "mixed-all-three",
    "mixed",
    '```bash\necho start\n```\n```mcp\n{"server": "jira", "method": "create_ticket", "arguments": {"summary": "x"}}\n```\n'
    '<a2a_request>\n{"target_agent": "pm", "task_description": "Prioritise the new ticket"}\n</a2a_request>',
    "a2a_request",
    code=[C("bash", "echo start")],
    tools=[T("jira", "create_ticket", {"summary": "x"})],
    a2a=[A("pm", "Prioritise the new ticket")],
)
case(
    "mixed-prose-json-data-and-yaml",
    "mixed",
    'Config:\n```yaml\nretries: 3\n```\nPayload:\n```json\n{"name": "x", "arguments": {}}\n```',
    "prose",
)
case(
    "mixed-tool-in-fence-and-real-tool",
    "mixed",
    'Format reminder:\n```text\n<tool_call>{"name": "fake.call", "arguments": {}}</tool_call>\n```\n<tool_call>\n'
    '{"name": "real.call", "arguments": {"x": 1}}\n</tool_call>',
    "tool_call",
    tools=[T("real", "call", {"x": 1})],
)
case(
    "mixed-unterminated-fence-swallows-tool",
    "mixed",
    '```python\nprint(1)\n<tool_call>\n{"name": "a.b", "arguments": {}}\n</tool_call>',
    "prose",
)
case(
    "mixed-code-then-a2a-bad",
    "mixed",
    '```python\nprint(42)\n```\n```a2a\n{"target_agent": "!!!", "task": "x"}\n```',
    "code_block",
    code=[C("python", "print(42)")],
)


def main() -> None:
    ids = [c["id"] for c in CASES]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise SystemExit(f"duplicate case ids: {sorted(duplicates)}")
    lines = [json.dumps(c, ensure_ascii=False, sort_keys=True) for c in CASES]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(CASES)} cases to {OUT}")


if __name__ == "__main__":
    main()
