"""The comparison the GPU runtime tests make with the numpy reference."""

import numpy as np


def assert_greedy_matches(executor, reference, prompts, steps: int, label="") -> None:
    """For each prompt: the prefill's and each decode step's logits within 1e-3 of the reference's
    (relative to its largest), and the greedy tokens equal; the executor decodes its own tokens."""
    for prompt in prompts:
        executor.reset()
        reference.reset()
        got, want = np.asarray(executor.prefill(prompt)), reference.forward(prompt)[-1]
        tokens, expected = [], []
        for step in range(steps + 1):
            assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max(), (label, len(prompt), step)
            tokens.append(int(np.argmax(got)))
            expected.append(int(np.argmax(want)))
            if step < steps:
                got, want = np.asarray(executor.decode(tokens[-1])), reference.forward([expected[-1]])[-1]
        assert tokens == expected, label
