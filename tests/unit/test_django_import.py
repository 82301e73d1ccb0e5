"""zemcp.django and zemcp.flask without their frameworks: the import says what to install; a default install imports neither."""

import subprocess
import sys


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_zemcp_django_without_django_says_what_to_install():
    done = _python(
        "import sys; sys.modules['django'] = None\n"
        "try:\n    import zemcp.django\nexcept ImportError as exc:\n    print(exc)"
    )
    assert done.returncode == 0, done.stderr
    assert "zemcp.django needs Django" in done.stdout and "pip install 'zemcp[django]'" in done.stdout, done.stdout


def test_importing_zemcp_imports_no_framework():
    done = _python("import sys, zemcp; print(sorted(m for m in ('django', 'flask') if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_zemcp_flask_without_flask_says_what_to_install():
    done = _python(
        "import sys; sys.modules['flask'] = None\n"
        "try:\n    import zemcp.flask\nexcept ImportError as exc:\n    print(exc)"
    )
    assert done.returncode == 0, done.stderr
    assert "zemcp.flask needs Flask" in done.stdout and "pip install 'zemcp[flask]'" in done.stdout, done.stdout
