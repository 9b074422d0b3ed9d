"""Multilingual text the tokenizer tests compare with Hugging Face `tokenizers` on: prose, digits, code,
contractions, scripts, emoji, whitespace runs, JSON, URLs, control characters."""

TEXTS = [
    "",
    "Hello, world!",
    "The capital of France is Paris.",
    "  12345  and 3.14159, -42, 1e10, 0x1F, ½ ² ٣ ४",
    "def f(x):\n    return x ** 2  # square\n\n\tif x:\n\t\tpass\n",
    'for (int i = 0; i < n; ++i) { a[i] = b[i] * 2; }  // C\r\n',
    "It's, I'm, we'll, they've, you'd, she'S 'twas ''s",
    "héllo wörld — naïve café; Ελληνικά; русский текст; 日本語のテキスト; 한국어; 中文分词测试",
    "emoji 😀👍🏽🇫🇷 and zero\u200bwidth, nbsp\u00a0here, ideographic\u3000space",
    "    leading spaces, trailing spaces    ",
    "tabs\t\tand\n\n\nnewlines \n \n  mixed   \t " + "\n" * 40 + " " * 40 + "end",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b\\n"}}',
    "URL https://example.com/path?q=1&r=two#frag, email a.b@c.org",
    "$$\\int_0^1 x^2 dx = \\frac{1}{3}$$ ~~~ ``` !!! ??? ...",
    "\x00\x01 control \x7f chars \x1c\x1d \U0001f9ff\U000e0001 rare: \u0132\u013f\u01a5\u0d9e",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
]
