// For the tests: the web-llm module as a bundle holds it.
import * as webllm from 'trellis-llm/webllm';

window.webllm = webllm;
