import ArgumentParser
import Foundation

/// `curlew`: Curlew's command-line tool.
@main
struct Curlew: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "curlew",
        abstract: "Make HTTP requests with Curlew (libcurl multi + OpenSSL, from Swift).",
        subcommands: [Get.self, Pin.self])
}
