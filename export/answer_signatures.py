"""The one answer signature a task model gets beside the text signatures, by task:

- multiple choice: `serve_choices(context, choices)` (`kerasbert.export.choice_answers`);
- span QA: `serve_question(question, context)` (`kerasbert.export.question_answers`);
- token classification: `serve_entities(text)` (`kerasbert.export.entity_answers`);
- text embedding: `serve_embedding(text)` (`kerasbert.export.embedding_answers`).

(A sequence classifier answers in `serve_text` itself: `kerasbert.export.answers`.) For each,
the texts the exporter verifies it on (`verification_inputs`), the reference it is judged
against (a Python decoder that does not run the signature's graph: `reference_answers`) and the
checks (`answer_signature_checks`).
"""

SIGNATURES = {"multiple_choice": "serve_choices", "question_answering": "serve_question",
              "token_classification": "serve_entities", "text_embedding": "serve_embedding"}

_LONG_CONTEXT = " ".join(
    f"In {1900 + year} the river town of Saint-Étienne built bridge number {year}, and its "
    f"mayor, Zoë Müller, opened it." for year in range(12))
_INPUTS = {
    "serve_choices": {
        "context": ["She opens the umbrella.", "Le café est fermé."],
        "choices": [["It is raining.", "The sun is hot.", "She sings."],
                    ["Il pleut.", "Nous partons, déçus.", "x"]]},
    "serve_question": {
        "question": ["Who opened the bridge?", "  Where is the café?", "When was bridge 7 built?"],
        "context": ["Zoë Müller opened the bridge in Saint-Étienne.",
                    "The café is in Paris, near the Seine.", _LONG_CONTEXT]},
    "serve_entities": {
        "text": ["Zoë Müller flew from Saint-Étienne to New York.",
                 "Crème brûlée, señor! Über façade; déjà vu.", "", _LONG_CONTEXT]},
    "serve_embedding": {
        "text": ["A small domesticated feline.", "Crème brûlée, señor! Über façade; déjà vu.",
                 "", "cat", _LONG_CONTEXT]},
}


def answer_signature(model):
    """The name of `model`'s answer signature, or None.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> answer_signature(kerasbert.models.build_task_model(config, "question_answering"))
    'serve_question'
    """
    return SIGNATURES.get(getattr(model, "task", None))


def answer_function(model, tokenizer, settings, length_buckets=True):
    """`model`'s answer signature as a `tf.function` (None for a model without one);
    `settings` is a `kerasbert.export.answer_settings.AnswerSettings`."""
    name = answer_signature(model)
    if name == "serve_choices":
        from kerasbert.export.choice_answers import choices_function
        return choices_function(model, tokenizer, settings, length_buckets)
    if name == "serve_question":
        from kerasbert.export.question_answers import question_function
        return question_function(model, tokenizer, settings)
    if name == "serve_entities":
        from kerasbert.export.entity_answers import entity_function
        return entity_function(model, tokenizer, settings)
    if name == "serve_embedding":
        from kerasbert.export.embedding_answers import embedding_function
        return embedding_function(model, tokenizer, settings, length_buckets)
    return None


def answer_output_names(model, settings):
    """The outputs `model`'s answer signature returns, sorted.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> answer_output_names(kerasbert.models.build_task_model(config, "multiple_choice"),
    ...                     AnswerSettings())
    ['choice', 'logits', 'probabilities']
    """
    name = answer_signature(model)
    if name == "serve_choices":
        from kerasbert.export.choice_answers import CHOICE_ANSWERS
        return sorted(("logits", *CHOICE_ANSWERS))
    if name == "serve_question":
        from kerasbert.export.question_answers import question_answer_names
        return sorted(question_answer_names(settings))
    if name == "serve_entities":
        from kerasbert.export.entity_answers import ENTITY_ANSWERS
        return sorted(ENTITY_ANSWERS)
    if name == "serve_embedding":
        from kerasbert.export.embedding_answers import EMBEDDING_ANSWERS
        return sorted(EMBEDDING_ANSWERS)
    return []


def verification_inputs(model):
    """`{input name: texts}` the exporter calls `model`'s answer signature with: accents,
    punctuation and (span QA, entities) a context longer than one 128-token window.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> sorted(verification_inputs(kerasbert.models.build_task_model(config, "multiple_choice")))
    ['choices', 'context']
    """
    return _INPUTS.get(answer_signature(model), {})


def reference_answers(model, tokenizer, settings):
    """What the Python decoders make of `verification_inputs(model)` (see each module)."""
    name, inputs = answer_signature(model), verification_inputs(model)
    if name == "serve_choices":
        from kerasbert.export.choice_answers import reference_choices
        return reference_choices(model, tokenizer, settings, inputs["context"], inputs["choices"])
    if name == "serve_question":
        from kerasbert.export.question_answers import reference_question_answers
        return reference_question_answers(model, tokenizer, settings, inputs["question"],
                                          inputs["context"])
    if name == "serve_embedding":
        from kerasbert.export.embedding_answers import reference_embeddings
        return reference_embeddings(model, tokenizer, settings, inputs["text"])
    from kerasbert.export.entity_answers import reference_entities
    return reference_entities(model, tokenizer, settings, inputs["text"])


def answer_signature_checks(model, produced, reference, tolerance):
    """The checks of an artifact's answer-signature outputs (`produced`, numpy by name) against
    `reference`: a list of `{"output", "check", "passed", ...}`."""
    name = answer_signature(model)
    if name == "serve_choices":
        from kerasbert.export.choice_answers import choice_checks
        return choice_checks(produced, reference, tolerance)
    if name == "serve_question":
        from kerasbert.export.question_answers import question_answer_checks
        return question_answer_checks(produced, reference, tolerance)
    if name == "serve_embedding":
        from kerasbert.export.embedding_answers import embedding_checks
        return embedding_checks(produced, reference, tolerance)
    from kerasbert.export.entity_answers import entity_checks
    return entity_checks(produced, reference, tolerance)
