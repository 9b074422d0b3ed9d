"""Requests from web-llm's examples, shared by the tests, the benchmark and the demo page."""

import json

from trellis.grammar.ebnf import WEBLLM_JSON_EBNF

# web-llm examples/json-schema: the TypeBox schema of its Harry Potter example, as JSON Schema.
PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "house": {"enum": ["Gryffindor", "Hufflepuff", "Ravenclaw", "Slytherin"]},
        "blood_status": {"enum": ["Pure-blood", "Half-blood", "Muggle-born"]},
        "occupation": {"enum": ["Student", "Professor", "Ministry of Magic", "Other"]},
        "wand": {"type": "object",
                 "properties": {"wood": {"type": "string"}, "core": {"type": "string"}, "length": {"type": "number"}},
                 "required": ["wood", "core", "length"]},
        "alive": {"type": "boolean"},
        "patronus": {"type": "string"},
    },
    "required": ["name", "house", "blood_status", "occupation", "wand", "alive", "patronus"],
}

HERMIONE_PROMPT = (
    "Hermione Granger is a character in Harry Potter. Please fill in the following information about this character "
    "in JSON format.Name is a string of character name. House is one of Gryffindor, Hufflepuff, Ravenclaw, Slytherin. "
    "Blood status is one of Pure-blood, Half-blood, Muggle-born. Occupation is one of Student, Professor, Ministry of "
    "Magic, Other. Wand is an object with wood, core, and length. Alive is a boolean. Patronus is a string.")

HERMIONE_REQUEST = {
    "messages": [{"role": "user", "content": HERMIONE_PROMPT}],
    "max_tokens": 128,
    "response_format": {"type": "json_object", "schema": json.dumps(PERSON_SCHEMA)},
}

# web-llm examples/function-calling, with a second tool.
WEATHER_TOOLS = [
    {"type": "function", "function": {
        "name": "get_current_weather", "description": "Get the current weather in a given location",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Get the current local time in a given location",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city, e.g. Tokyo"}}, "required": ["location"]}}},
]

WEATHER_REQUEST = {
    "messages": [{"role": "user", "content": "What is the current weather in celsius in Pittsburgh and Tokyo?"}],
    "tools": WEATHER_TOOLS,
    "tool_choice": "required",
    "max_tokens": 96,
}


# ---- the demo page's examples (the site serves `demo_examples()` as examples.json) -------------

PRODUCT_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "category": {"enum": ["tent", "backpack", "stove", "lamp", "boots"]},
        "price_usd": {"type": "number", "minimum": 0, "maximum": 1000},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 16}, "minItems": 1, "maxItems": 3},
        "in_stock": {"type": "boolean"},
    },
    "required": ["name", "category", "price_usd", "tags", "in_stock"],
    "additionalProperties": False,
}

TRIP_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "plan": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {"when": {"enum": ["morning", "afternoon", "evening"]},
                               "what": {"type": "string", "maxLength": 60}},
                "required": ["when", "what"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["city", "days", "plan"],
    "additionalProperties": False,
}

ARITHMETIC_GRAMMAR = r"""root ::= expr " = " number
expr ::= term (ws ("+" | "-") ws term)*
term ::= factor (ws ("*" | "/") ws factor)*
factor ::= number | "(" expr ")"
number ::= "0" | [1-9] [0-9]{0,3}
ws ::= " "?"""

VERDICT_GRAMMAR = r"""root ::= answer ", because " reason "."
answer ::= "Yes" | "No" | "It depends"
reason ::= [a-z] [a-z ,']{4,80}"""

TEXT_PROMPT = "What is the capital of France? Answer in one word."


def demo_examples() -> dict:
    """What the demo page's format panel offers: per format, named examples with a prompt each."""
    return {
        "text": {"prompt": TEXT_PROMPT},
        "schemas": [
            {"name": "Hermione (web-llm's Harry Potter schema)", "schema": PERSON_SCHEMA, "prompt": HERMIONE_PROMPT},
            {"name": "Outdoor-store product (bounds, array)", "schema": PRODUCT_SCHEMA,
             "prompt": "Invent a product for an outdoor store and describe it."},
            {"name": "Trip plan (nested objects)", "schema": TRIP_SCHEMA, "prompt": "Plan a short trip to Lisbon."},
            {"name": "Any JSON object (no schema)", "schema": None,
             "prompt": "List three fruits and their colours in JSON."},
        ],
        "grammars": [
            {"name": "JSON (web-llm's EBNF example)", "grammar": WEBLLM_JSON_EBNF,
             "prompt": "Introduce yourself in JSON briefly."},
            {"name": "Arithmetic with its result", "grammar": ARITHMETIC_GRAMMAR,
             "prompt": "Write a small arithmetic expression and its result."},
            {"name": "Yes / no, with a reason", "grammar": VERDICT_GRAMMAR, "prompt": "Should I learn to cook?"},
        ],
        "regexes": [
            {"name": "ISO date", "regex": r"\d{4}-\d{2}-\d{2}",
             "prompt": "On what date did Apollo 11 land on the Moon?"},
            {"name": "US phone number", "regex": r"\(\d{3}\) \d{3}-\d{4}",
             "prompt": "Make up a phone number for a pizza place."},
            {"name": "One-word colour", "regex": "(red|orange|yellow|green|blue|purple|black|white)",
             "prompt": "What colour is the sky on a clear day?"},
            {"name": "Short verdict sentence", "regex": r"[A-Z][a-z]+ (is|was) (great|good|bad|terrible)\.",
             "prompt": "Give a one-sentence verdict on pineapple pizza."},
        ],
        "tools": {"tools": WEATHER_TOOLS, "prompt": WEATHER_REQUEST["messages"][0]["content"]},
    }
