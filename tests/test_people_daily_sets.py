"""The People's Daily sets of the reading tasks, on tagged lines in the corpus's layout: questions with the entity
replaced, its unique span as the answer, and the multiple-choice and pair forms of the same questions."""

import random

from hf_roformer.apps.people_daily_sets import as_choice_questions, as_sentence_pairs, questions_of, tagged_words


LINES = [
    "１２月/t  ３１日/t  ，/w  国家/n  主席/n  江/nr  泽民/nr  发表/v  新年/t  讲话/n  。/w",
    "新华社/nt  记者/n  兰/nr  红光/nr  在/p  北京/ns  摄影/v  ，/w  上海/ns  和/c  广州/ns  同时/d  转播/v  。/w",
]


def test_tagged_words_join_surname_and_given_name():
    assert tagged_words(LINES[0])[5] == ("江泽民", "nr")
    assert [word for word, tag in tagged_words(LINES[1]) if tag == "nr"] == ["兰红光"]


def test_questions_replace_one_entity_whose_span_is_the_answer():
    document = [tagged_words(line) for line in LINES]
    context = "".join(word for paragraph in document for word, _ in paragraph)
    questions = questions_of(document, "d", random.Random(0), per_document=10)
    assert {question["answers"]["text"][0] for question in questions} == {
        "江泽民",
        "新华社",
        "兰红光",
        "北京",
        "上海",
        "广州",
    }
    for question in questions:
        answer, start = question["answers"]["text"][0], question["answers"]["answer_start"][0]
        assert question["context"] == context and context[start : start + len(answer)] == answer
        word = {"nr": "谁", "ns": "哪里", "nt": "什么机构"}
        sentence = question["sentence"]
        assert question["question"] in {sentence.replace(answer, replacement) for replacement in word.values()}
    places = next(question for question in questions if question["answers"]["text"] == ["北京"])
    assert places["question"] == "新华社记者兰红光在哪里摄影，上海和广州同时转播。" and places["others"] == [
        "上海",
        "广州",
    ]
    person = next(question for question in questions if question["answers"]["text"] == ["江泽民"])
    assert person["others"] == ["兰红光"]
    choices = as_choice_questions([places, person])
    assert [len(item[1][0]["choice"]) for item in choices] == [3, 2]
    assert all(item[1][0]["answer"] in item[1][0]["choice"] for item in choices)
    pairs = as_sentence_pairs([places, person])
    assert pairs == [
        (places["question"], places["sentence"], 1), (places["question"], person["sentence"], 0),
        (person["question"], person["sentence"], 1), (person["question"], places["sentence"], 0),
    ]  # fmt: skip
