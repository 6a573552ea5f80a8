import json

import pytest

from tests.browser_support import login

pytestmark = pytest.mark.browser


def test_login_page_and_sign_in(weft_server, browser_page):
    page = browser_page
    page.goto(weft_server.url + "/accounts/login/")
    assert page.title().startswith("Sign in")
    login(page, weft_server, "operator")
    page.goto(weft_server.url + "/api/accounts/users/me/?format=json")
    me = json.loads(page.inner_text("body"))
    assert (me["username"], me["role"]) == ("operator", "operator")


def test_bad_password_is_refused(weft_server, browser_page):
    login(browser_page, weft_server, "admin", "wrong-password")
    assert "didn't match" in browser_page.inner_text("main")
