import Foundation
import Serialization
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request body's side of curl's callbacks (driver thread, inside curl_multi_perform):
/// the read and seek callbacks, and the progress callback, which watches an upload whose
/// answer came before its body was sent.
extension TaskDelegate {
    /// What the read callback gives curl: bytes, a pause until the body's stream has data, or a
    /// failure. A pause holds the idle clock until the response head (the body's producer sets
    /// the pace, `TransferClock.Hold.bodyProducer`): a producer that never delivers, before any
    /// answer, is ended by the resource timeout only.
    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> BodyReader.ReadOutcome {
        guard let reader = bodyReader else { return .bytes(0) }
        let outcome = reader.read(into: buffer)
        switch outcome {
        case .bytes(let count) where count > 0: state.noteActivity(now: passClock.now)
        case .pause: state.bodyProducerFellBehind(now: passClock.now)  // its wake-up continues it
        case .failed(let error): failure = error
        default: break
        }
        return outcome
    }

    /// Has the loop lift this transfer's send pause after the current pass, once
    /// (`DriverLoop.liftSendPauses`).
    func queueSendPauseLift() {
        guard !sendPauseLiftQueued else { return }
        sendPauseLiftQueued = true
        passClock.answeredWhileSendPaused.append(self)
    }

    func rewindBody() -> Bool {
        guard let bodyReader else { return true }
        if bodyReader.rewind() {
            // libcurl sends the body again within this transfer (a kept-alive connection that
            // died, a refused HTTP/2 stream): its count starts over, as the hook's does.
            task.beginSendAttempt()
            return true
        }
        // libcurl fails the transfer (CURLE_SEND_FAIL_REWIND); the reason is the task's error.
        if let reason = bodyReader.rewindFailure { failure = reason }
        return false
    }

    /// False ends the exchange (`CURLE_ABORTED_BY_CALLBACK`; `answeredWhole` makes that no error).
    func didProgress(uploaded: Int64, uploadTotal: Int64, downloaded: Int64, downloadTotal: Int64) -> Bool {
        // An answer after which the connection closes (or an error status, which makes libcurl
        // stop the sending and close), while the producer is behind. When it ends, libcurl
        // stops the sending but keeps the read callback's send pause, and then no longer
        // reads the socket; and the read that ends it may bring no body byte for
        // `didReceiveBody` to notice (a close-delimited body's FIN, a chunked body's last
        // chunk, a gzip trailer, a body cut short). Nothing would call back until the silence
        // probe (and where libcurl needs none, until the idle timeout). So the pause is lifted
        // after such a pass, but not in the pass right after this transfer's own lift: that
        // pass is the lift's (libcurl runs the transfer at once, reading before it asks the
        // read callback, which pauses again). And not in a third pass in a row with lifts,
        // which two transfers lifted in turn would make forever: such a lift waits a few
        // milliseconds for a pass of its own (`PassClock.deferLift`), where every transfer
        // waiting so is lifted at once.
        if state.awaitsBodyProducer, state.hasAnswerHead, sendPauseLiftPass != passClock.pass &- 1,
            head.statusCode >= 300 || head.closesConnection
        {
            if passClock.liftsInARow >= 2 {
                passClock.deferLift()
            } else {
                queueSendPauseLift()
            }
        }
        // Over HTTP/2 a success can end whole (END_STREAM) before the request body did
        // (RFC 9113 §8.1: the server needs no more of it; it may add RST_STREAM(NO_ERROR)).
        // libcurl 7.88 stops the sending only for an error status, and the stream's end
        // leaves the read callback's send pause in place: the task waited for its producer,
        // forever if the producer waits for the answer. Once the answer's announced body is
        // all in, the pause is lifted and the read callback ends the exchange
        // (`answeredWhole`), which completes with the answer.
        // Not an empty answer complete at its head (a 202 while the server goes on reading
        // the body: libcurl stops reading at the length, and END_STREAM is not seen).
        if state.awaitsBodyProducer, state.hasAnswerHead, !answeredWhole, head.statusCode < 300,
            head.httpVersion == "HTTP/2", let length = head.expectedContentLength, length > 0, downloaded >= length
        {
            answeredWhole = true
            queueSendPauseLift()
        } else if answeredWholeWaits, !state.holdsReceiving, !lastWritePaused {
            answeredWholeWaits = false
            queueSendPauseLift()
        } else if !state.awaitsBodyProducer, state.hasAnswerHead, !answeredWhole, head.statusCode < 300,
            head.httpVersion == "HTTP/2", let length = head.expectedContentLength, length > 0, downloaded >= length,
            uploadTotal > 0, uploaded < uploadTotal, !state.holdsReceiving, !lastWritePaused
        {
            // The same answer while a whole body (`Data`, a file) is still being sent: nothing
            // pauses, and after the server's RST_STREAM(NO_ERROR), which RFC 9113 §8.1 says must
            // not cost the answer, the stream's window never opens again: libcurl 7.88 waited to
            // send the rest until the idle timeout, and the answer was lost. The exchange ends
            // here with the answer it has.
            answeredWhole = true
            return false
        }
        // Bytes curl handed to the socket: an upload the server stopped reading stops here.
        if uploaded != lastUploadedCount || downloaded != lastDownloadedCount {
            lastUploadedCount = uploaded
            lastDownloadedCount = downloaded
            state.noteActivity(now: passClock.now)
            state.observeCounts(uploaded: uploaded, downloaded: downloaded, now: passClock.now)
        }
        // Installed for a capped download too (`configure`): a request without a body sends nothing.
        guard let bodyReader else { return true }
        if let length = bodyReader.length {
            task.didSend(bytes: uploaded, expected: length)
        } else {
            // Sent chunked: libcurl's total is 0 (unknown) and its count includes the chunks'
            // framing (45 bytes over a 300,000-byte body). The task reports body bytes against
            // an unknown total (-1), as URLSession does: at most what the body gave curl.
            task.didSend(bytes: min(uploaded, bodyReader.bytesRead), expected: -1)
        }
        return true
    }
}
