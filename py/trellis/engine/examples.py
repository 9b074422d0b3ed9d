"""Requests from web-llm's examples, shared by the tests, the benchmark and the demo page."""

import json

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
