#!/usr/bin/env python3
"""Copies a .proto file without its `service` blocks.

protoc-c generates C stubs for services, and the kubelet's method names
(Register) collide with C keywords; cuslice talks gRPC through gRPC C-core
and needs only the messages from protoc-c. The .proto files in the source
tree keep their services (the fake kubelet of the tests loads them whole).

usage: proto-messages.py IN.proto OUT.proto
"""
import re
import sys


def strip_services(text):
    out, i = [], 0
    for m in re.finditer(r'^\s*service\s+\w+\s*\{', text, re.M):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 0, m.end() - 1
        while j < len(text):
            if text[j] == '{':
                depth += 1
            elif text[j] == '}':
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth:
            sys.exit('proto-messages.py: unbalanced braces in a service block')
        i = j + 1
    out.append(text[i:])
    return ''.join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding='utf-8') as f:
        text = f.read()
    with open(sys.argv[2], 'w', encoding='utf-8') as f:
        f.write(strip_services(text))


if __name__ == '__main__':
    main()
