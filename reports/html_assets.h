// The HTML report's stylesheet and script (reports/html/), compiled in so a report needs no file
// beside it. Private to reports/.
#pragma once

namespace trainrx::reports {

extern const char* const kReportCss;
extern const char* const kReportJs;

}  // namespace trainrx::reports
