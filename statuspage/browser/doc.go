// Package browser holds the headless-Chromium test of the status page.
//
// It is a module of its own (github.com/outbound-go/outbound/statuspage/browser)
// so that chromedp and cdproto never enter the module graph of a service
// that imports outbound: they exist only for this test. It needs Debian's
// chromium package; outside CI the test skips when no browser is found.
package browser
