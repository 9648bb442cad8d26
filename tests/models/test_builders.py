from tests.builders import make_node, make_pod


def test_smoke():
    assert make_pod("p").obj().metadata.name == "p"
    assert make_node("n").obj().metadata.namespace == ""
