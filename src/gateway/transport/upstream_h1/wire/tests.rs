use super::*;

fn head(bytes: &[u8], head_request: bool) -> Result<Option<Head>> {
    parse_head(&mut BytesMut::from(bytes), head_request)
}

/// Decode all of `bytes` under `framing`: the body, and whether it ended.
fn body(bytes: &[u8], mut framing: Framing) -> Result<(Vec<u8>, bool)> {
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    loop {
        match decode(&mut buf, &mut framing)? {
            Decoded::Data(b) => out.extend_from_slice(&b),
            Decoded::NeedMore => return Ok((out, false)),
            Decoded::Done => return Ok((out, true)),
        }
    }
}

#[test]
fn the_request_head_keeps_the_target_and_header_case() {
    let mut req = RequestHeader::build("POST", b"/mcp?x=1", None).unwrap();
    req.append_header("Mcp-Method", "tools/call").unwrap();
    req.append_header("content-length", "2").unwrap();
    let (wire, framing) = request_head(&req).unwrap();
    assert_eq!(
        String::from_utf8(wire).unwrap(),
        "POST /mcp?x=1 HTTP/1.1\r\nMcp-Method: tools/call\r\ncontent-length: 2\r\n\r\n"
    );
    assert_eq!(framing, RequestFraming::Raw);
    req.append_header("Transfer-Encoding", "gzip, chunked")
        .unwrap();
    assert_eq!(request_head(&req).unwrap().1, RequestFraming::Chunked);
}

#[test]
fn response_framing_follows_rfc_9112() {
    let h = head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false)
        .unwrap()
        .unwrap();
    assert_eq!((h.framing, h.keep_alive), (Framing::Length(5), true));
    let h = head(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(h.framing, Framing::Chunked(Chunk::Size));
    // No length: until close, never reused.
    let h = head(b"HTTP/1.0 200 OK\r\n\r\n", false).unwrap().unwrap();
    assert_eq!((h.framing, h.keep_alive), (Framing::UntilClose, false));
    // ... and goes to the client chunked, as HTTP/1.1.
    assert_eq!(h.header.headers["transfer-encoding"], "chunked");
    assert_eq!(h.header.version, http::Version::HTTP_11);
    // A coding other than chunked is left as the upstream sent it (read until close).
    let h = head(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n",
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!((h.framing, h.keep_alive), (Framing::UntilClose, false));
    assert_eq!(h.header.headers["transfer-encoding"], "gzip");
    // No body for HEAD, 204, 304 and 1xx, whatever the headers say.
    for (bytes, is_head) in [
        (&b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"[..], true),
        (b"HTTP/1.1 204 No Content\r\n\r\n", false),
        (
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            false,
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\n", false),
    ] {
        assert_eq!(
            head(bytes, is_head).unwrap().unwrap().framing,
            Framing::Empty
        );
    }
    // Connection: close and HTTP/1.0 without keep-alive end the connection.
    let h = head(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        false,
    );
    assert!(!h.unwrap().unwrap().keep_alive);
    let h = head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
    assert!(!h.unwrap().unwrap().keep_alive);
    let h = head(
        b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
        false,
    );
    assert!(h.unwrap().unwrap().keep_alive);
}

#[test]
fn ambiguous_or_broken_heads_are_refused_or_not_reused() {
    assert!(head(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        false
    )
    .is_err());
    assert!(head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
    for length in ["+5", "-5", " ", "5 5", "0x5", "18446744073709551616"] {
        let h = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n12345");
        assert!(
            head(h.as_bytes(), false).is_err(),
            "Content-Length: {length:?}"
        );
    }
    assert!(head(b"HTTP/1.1 2000 OK\r\n\r\n", false).is_err());
    // Both framings: chunked wins and the connection is not reused.
    let h = head(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (h.framing, h.keep_alive),
        (Framing::Chunked(Chunk::Size), false)
    );
    // A head still arriving is not an error, one past 64 KiB is.
    assert!(head(b"HTTP/1.1 200 OK\r\nContent-", false)
        .unwrap()
        .is_none());
    let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
    while big.len() < MAX_HEAD {
        big.extend_from_slice(b"x-pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    assert!(head(&big, false).is_err());
}

#[test]
fn the_head_is_consumed_and_the_body_left() {
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 201 Created\r\nX-A: 1\r\nX-A: 2\r\nContent-Length: 2\r\n\r\nok"[..],
    );
    let h = parse_head(&mut buf, false).unwrap().unwrap();
    assert_eq!(&buf[..], b"ok");
    assert_eq!(h.header.status.as_u16(), 201);
    assert_eq!(h.header.headers.get_all("x-a").iter().count(), 2);
}

#[test]
fn bodies_decode_to_their_end_and_never_past_it() {
    assert_eq!(
        body(b"hello, next", Framing::Length(5)).unwrap().0,
        b"hello"
    );
    let (b, done) = body(b"hel", Framing::Length(5)).unwrap();
    assert_eq!((b.as_slice(), done), (&b"hel"[..], false));
    let chunked = b"5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nTrailer: x\r\n\r\nNEXT";
    let mut buf = BytesMut::from(&chunked[..]);
    let mut f = Framing::Chunked(Chunk::Size);
    let mut out = Vec::new();
    while let Decoded::Data(d) = decode(&mut buf, &mut f).unwrap() {
        out.extend_from_slice(&d);
    }
    assert_eq!(out, b"hello!");
    assert_eq!(f, Framing::Empty, "the body ended");
    assert_eq!(&buf[..], b"NEXT", "the bytes after the body are left");
    // Every split point of a chunked body decodes to the same bytes.
    for cut in 0..chunked.len() - 4 {
        let mut buf = BytesMut::from(&chunked[..cut]);
        let mut f = Framing::Chunked(Chunk::Size);
        let mut out = Vec::new();
        let mut rest = &chunked[cut..chunked.len() - 4];
        loop {
            match decode(&mut buf, &mut f).unwrap() {
                Decoded::Data(d) => out.extend_from_slice(&d),
                Decoded::Done => break,
                Decoded::NeedMore => {
                    assert!(!rest.is_empty(), "stuck at cut {cut}");
                    buf.extend_from_slice(&rest[..1]);
                    rest = &rest[1..];
                }
            }
        }
        assert_eq!(out, b"hello!", "cut {cut}");
    }
    assert!(body(b"zz\r\n", Framing::Chunked(Chunk::Size)).is_err());
    for line in ["\r\n", ";ext\r\n", " \r\n", "\t0\r\n", "-1\r\n"] {
        let wire = format!("2\r\nab\r\n{line}\r\n");
        let decoded = body(wire.as_bytes(), Framing::Chunked(Chunk::Size));
        assert!(decoded.is_err(), "a size line {line:?} is no last chunk");
    }
    assert!(body(b"2\r\nabXY", Framing::Chunked(Chunk::Size)).is_err());
}

#[test]
fn an_http2_request_becomes_http_1_1_with_a_host_and_a_framing() {
    let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
    req.set_version(http::Version::HTTP_2);
    req.set_uri("http://edge.example:8443/mcp".parse().unwrap());
    req.insert_header("host", "other").unwrap();
    to_http11(&mut req, true).unwrap();
    assert_eq!(req.headers["host"], "edge.example:8443", ":authority wins");
    assert_eq!(
        req.headers["transfer-encoding"], "chunked",
        "a body needs a framing"
    );
    let (wire, framing) = request_head(&req).unwrap();
    assert!(wire.starts_with(b"POST /mcp HTTP/1.1\r\n"));
    assert_eq!(framing, RequestFraming::Chunked);
    // An HTTP/1.1 request keeps its Host; one without gets an empty one; a length stays.
    let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
    req.insert_header("host", "a").unwrap();
    req.insert_header("content-length", "3").unwrap();
    to_http11(&mut req, true).unwrap();
    assert_eq!(req.headers["host"], "a");
    assert!(req.headers.get("transfer-encoding").is_none());
    let mut req = RequestHeader::build("GET", b"/mcp", None).unwrap();
    to_http11(&mut req, false).unwrap();
    assert_eq!(req.headers["host"], "");
    let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
    req.set_uri("http://user@edge/mcp".parse().unwrap());
    assert!(to_http11(&mut req, false).is_err(), "userinfo is refused");
    let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
    req.insert_header("host", "user@edge").unwrap();
    assert!(to_http11(&mut req, false).is_err(), "in Host too");
}

#[test]
fn chunks_framed_here_decode_to_the_same_bytes() {
    let parts: [&[u8]; 3] = [b"event: a\n\n", &[b'x'; 300], b"0"];
    let mut wire = Vec::new();
    for p in parts {
        wire.extend_from_slice(chunk_size_line(p.len()).as_bytes());
        wire.extend_from_slice(p);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(LAST_CHUNK);
    assert_eq!(chunk_size_line(300), "12c\r\n");
    let (got, ended) = body(&wire, Framing::Chunked(Chunk::Size)).unwrap();
    assert_eq!(got, parts.concat());
    assert!(ended, "the last chunk ends the body");
}

#[test]
fn a_body_in_hand_goes_with_its_length_whatever_the_client_framing() {
    let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
    req.insert_header("transfer-encoding", "chunked").unwrap();
    frame_whole(&mut req, 1234).unwrap();
    assert_eq!(req.headers["content-length"], "1234");
    assert!(!req.headers.contains_key("transfer-encoding"));
    let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
    req.insert_header("content-length", "0").unwrap();
    frame_whole(&mut req, 0).unwrap();
    assert_eq!(req.headers["content-length"], "0");
    let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
    frame_whole(&mut req, 0).unwrap();
    assert!(
        !req.headers.contains_key("content-length"),
        "no body, no framing"
    );
}
