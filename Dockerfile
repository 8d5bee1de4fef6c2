# One image for every trawl service; compose.yaml picks the command per service.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src

# Dependencies first, from pyproject.toml alone, so a code change reuses this layer.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt

COPY . .
RUN pip install --no-deps . && rm -rf /src/build

# Run as an unprivileged user from its home, so the installed package (not /src) is imported.
RUN useradd --create-home --uid 10001 trawl
USER trawl
WORKDIR /home/trawl

CMD ["trawl", "--help"]
